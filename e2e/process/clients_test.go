package process

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The copy-paste clients of examples/clients, run as an application runs
// them, against real sidecars on one SQLite file.

// appClient is one way to run a copy-paste client.
type appClient struct {
	name string
	argv []string
	env  []string
}

// clients are the shell client with jq, the shell client with sed (jq
// made unfindable), the Python client and the Node.js client. Each tool
// they need must be installed: a missing one fails the test, naming it.
func clients(t *testing.T) []appClient {
	t.Helper()
	for _, tool := range []string{"sh", "curl", "jq", "sed", "python3", "node"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the client tests need %s on PATH (Debian: apt-get install -y curl jq python3; Node.js 20 or later): %v", tool, err)
		}
	}
	dir := sidecartest.RepoPath(t, "examples", "clients")
	sh, py, mjs := filepath.Join(dir, "leader.sh"), filepath.Join(dir, "leader.py"), filepath.Join(dir, "leader.mjs")
	return []appClient{
		{"sh with jq", []string{"sh", sh}, nil},
		{"sh with sed", []string{"sh", sh}, []string{"JQ=/nonexistent/jq"}},
		{"python", []string{python3(t), py}, nil},
		{"node", []string{"node", mjs}, nil},
	}
}

// python3 is the interpreter that python3 on PATH runs (sys.executable),
// failing t if there is none. A version manager's shim (pyenv's) starts
// several processes before the interpreter at every run, seconds each on
// a busy machine; the tests run it once.
func python3(t *testing.T) string {
	t.Helper()
	path, err := python3Once()
	if err != nil {
		t.Fatalf("the client tests need python3 on PATH (Debian: apt-get install -y python3): %v", err)
	}
	return path
}

var python3Once = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", fmt.Errorf("python3 -c 'import sys; print(sys.executable)': %w", err)
	}
	path := strings.TrimSpace(string(out))
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("python3 names its interpreter %q, not an absolute path", path)
	}
	return path, nil
})

// run runs c against the app API at url with extra arguments and returns
// its stdout, stderr and exit status.
func (c appClient) run(t *testing.T, url string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(c.argv[0], append(c.argv[1:], args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "LEADER_SIDECAR_URL=" + url}, c.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v", c.name, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// checkTerm fails unless out is "<token> <identity> <validForMs>" of the
// leader's term.
func checkTerm(t *testing.T, who, out string, token int64, identity string) {
	t.Helper()
	f := strings.Fields(out)
	if len(f) != 3 || f[0] != strconv.FormatInt(token, 10) || f[1] != identity {
		t.Fatalf("%s printed %q, want %q and ms", who, out, fmt.Sprintf("%d %s", token, identity))
	}
	ms, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || ms <= 0 || ms > sidecartest.RenewDeadline.Milliseconds() {
		t.Fatalf("%s printed validForMs %q, want 1..%d", who, f[2], sidecartest.RenewDeadline.Milliseconds())
	}
}

// closedPort is a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestCopyPasteClientsAgainstTheSidecar(t *testing.T) {
	t.Parallel()
	cs := clients(t)
	all := sidecartest.StartMany(t, sidecartest.DBPath(t), 2)
	leader, token := sidecartest.AwaitSettledLeader(t, all, 10*time.Second)
	standby := sidecartest.Without(all, leader)[0]
	identity := sidecartest.IdentityOf(t, leader)

	// Answers that are not the sidecar's, or not usable.
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"leader":true,"identity":"a_1","token":3,"validForMs":5}`, http.StatusServiceUnavailable)
	}))
	defer unavailable.Close()
	bodies := map[string]string{
		"HTML":                      "<html>proxy error</html>",
		"no leader field":           `{"holder":"a_1"}`,
		"leader without token":      `{"leader":true,"identity":"a_1","holder":"a_1","token":null,"validUntil":null,"validForMs":null}`,
		"leader with token 0":       `{"leader":true,"identity":"a_1","holder":"a_1","token":0,"validForMs":5}`,
		"leader without validForMs": `{"leader":true,"identity":"a_1","holder":"a_1","token":3}`,
	}
	fakes := map[string]string{}
	for name, body := range bodies {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintln(w, body)
		}))
		defer srv.Close()
		fakes[name] = srv.URL
	}
	fakes["503 with a leader's body"] = unavailable.URL
	dead := "http://" + closedPort(t)
	// A shard group's sidecar has no single leader: its 409 says so, and
	// every client passes that on.
	shardGroup := sidecartest.Start(t, sidecartest.DBPath(t), "--shards", "2")

	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := c.run(t, "http://"+leader.Addr())
			if code != 0 {
				t.Fatalf("on the leader: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			checkTerm(t, c.name, out, token, identity)

			if out, errOut, code := c.run(t, "http://"+standby.Addr()); code != 1 || out != "" {
				t.Fatalf("on the standby: exit %d, stdout %q, stderr %q; want 1 and nothing", code, out, errOut)
			}
			if out, errOut, code := c.run(t, dead); code != 2 || out != "" || errOut == "" {
				t.Fatalf("with no sidecar: exit %d, stdout %q, stderr %q; want 2 and a message", code, out, errOut)
			}
			for name, url := range fakes {
				if out, errOut, code := c.run(t, url); code != 2 || out != "" || errOut == "" {
					t.Fatalf("answered %s: exit %d, stdout %q, stderr %q; want 2 and a message", name, code, out, errOut)
				}
			}
			if out, errOut, code := c.run(t, "http://"+shardGroup.Addr()); code != 2 || out != "" ||
				!strings.Contains(errOut, "409") || !strings.Contains(errOut, "there is no single leader; GET /shards lists the shards held here") {
				t.Fatalf("on a shard group's sidecar: exit %d, stdout %q, stderr %q; want 2 and the sidecar's reason", code, out, errOut)
			}
		})
	}
	if st, err := leader.Leader(); err != nil || !st.Leader || *st.Token != token {
		t.Fatalf("after the clients the leader answers %+v, %v", st, err)
	}
}

// leader.sh --wait (with jq and with sed), leader.py --wait and
// leader.mjs --wait block on a standby until it leads, then print its new
// term; imported, the Python and Node.js clients' current term has a
// deadline that is running.
func TestWaitingClientsWaitForLeadership(t *testing.T) {
	t.Parallel()
	clients(t)
	dir := sidecartest.RepoPath(t, "examples", "clients")
	ms := strconv.FormatInt(sidecartest.RenewDeadline.Milliseconds(), 10)
	cases := []struct {
		name string
		wait []string
		env  []string
		// imported (nil for the shell client, which is not a library) prints "<token> <identity> <valid> <0 < ms left <= max>"
		// from the client used as a library, against the sidecar at url.
		imported func(url string) *exec.Cmd
	}{
		{"sh with jq", []string{"sh", filepath.Join(dir, "leader.sh"), "--wait"}, nil, nil},
		{"sh with sed", []string{"sh", filepath.Join(dir, "leader.sh"), "--wait"}, []string{"JQ=/nonexistent/jq"}, nil},
		{"python", []string{python3(t), filepath.Join(dir, "leader.py"), "--wait"}, nil, func(url string) *exec.Cmd {
			script := "import sys; sys.path.insert(0, sys.argv[1]); import leader\n" +
				"t = leader.current_term(sys.argv[2])\n" +
				"print(t.token, t.identity, t.valid(), 0 < t.valid_for_ms() <= int(sys.argv[3]))\n"
			cmd := exec.Command(python3(t), "-c", script, dir, url, ms)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PYTHONDONTWRITEBYTECODE=1"} // no __pycache__ in the tree
			return cmd
		}},
		{"node", []string{"node", filepath.Join(dir, "leader.mjs"), "--wait"}, nil, func(url string) *exec.Cmd {
			script := "const [, module, url, max] = process.argv;\n" +
				"const { currentTerm } = await import(module);\n" +
				"const t = await currentTerm(url);\n" +
				"const ms = t.validForMs();\n" +
				"console.log(t.token, t.identity, t.valid() ? 'True' : 'False', 0 < ms && ms <= Number(max) ? 'True' : 'False');\n"
			cmd := exec.Command("node", "--input-type=module", "-e", script, "--", "file://"+filepath.Join(dir, "leader.mjs"), url, ms)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			return cmd
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			all := sidecartest.StartMany(t, sidecartest.DBPath(t), 2)
			leader, token := sidecartest.AwaitSettledLeader(t, all, 10*time.Second)
			standby := sidecartest.Without(all, leader)[0]

			wait := exec.Command(c.wait[0], c.wait[1:]...)
			wait.Env = append([]string{"PATH=" + os.Getenv("PATH"), "LEADER_SIDECAR_URL=http://" + standby.Addr()}, c.env...)
			var stdout, stderr bytes.Buffer
			wait.Stdout, wait.Stderr = &stdout, &stderr
			if err := wait.Start(); err != nil {
				t.Fatal(err)
			}
			var waitErr error
			done := make(chan struct{})
			go func() { waitErr = wait.Wait(); close(done) }()
			t.Cleanup(func() { _ = wait.Process.Kill(); <-done })

			select {
			case <-done:
				t.Fatalf("%s on a standby returned at once: %v, %q, %q", c.wait, waitErr, stdout.String(), stderr.String())
			case <-time.After(time.Second):
			}
			if code, st := release(t, leader); code != http.StatusOK {
				t.Fatalf("releasing the leader: %d %+v", code, st)
			}
			select {
			case <-done:
				if waitErr != nil {
					t.Fatalf("%s: %v, stderr %q", c.wait, waitErr, stderr.String())
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s still waiting 5s after the leader released; stderr %q", c.wait, stderr.String())
			}
			checkTerm(t, c.name+" --wait", stdout.String(), token+1, sidecartest.IdentityOf(t, standby))
			if c.imported == nil {
				return
			}

			out, err := c.imported("http://" + standby.Addr()).CombinedOutput()
			if want := fmt.Sprintf("%d %s True True\n", token+1, sidecartest.IdentityOf(t, standby)); err != nil || string(out) != want {
				t.Fatalf("imported: %q, %v; want %q", out, err, want)
			}
		})
	}
}

// TestClientsReadme checks that examples/clients/README.md names every
// client of the folder, every flag of each client's usage line, and
// every test of the clients in this package, and that the README's
// section for applications points to it.
func TestClientsReadme(t *testing.T) {
	t.Parallel()
	dir := sidecartest.RepoPath(t, "examples", "clients")
	page, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatalf("examples/clients has no README: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	usage := regexp.MustCompile(`usage: leader\.\w+ \[(.*)\]`)
	clients := 0
	for _, e := range entries {
		if e.Name() == "README.md" {
			continue
		}
		clients++
		if !strings.Contains(string(page), "("+e.Name()+")") {
			t.Errorf("examples/clients/README.md does not link %s", e.Name())
		}
		src, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m := usage.FindSubmatch(src)
		if m == nil {
			t.Fatalf("%s has no usage line", e.Name())
		}
		for _, flag := range regexp.MustCompile(`--[a-z-]+`).FindAllString(string(m[1]), -1) {
			if !strings.Contains(string(page), "`"+flag) {
				t.Errorf("examples/clients/README.md does not give %s's flag %s", e.Name(), flag)
			}
		}
	}
	if clients != 3 {
		t.Errorf("examples/clients holds %d clients, want the 3 the README names", clients)
	}
	tests := regexp.MustCompile(`(?m)^func (Test\w*Clients\w*)\(`)
	for _, file := range []string{"clients_test.go", "clientshards_test.go"} {
		src, err := os.ReadFile(sidecartest.RepoPath(t, "e2e", "process", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tests.FindAllStringSubmatch(string(src), -1) {
			if !strings.Contains(string(page), "`"+m[1]+"`") {
				t.Errorf("examples/clients/README.md does not name the test %s", m[1])
			}
		}
	}
	readme, err := os.ReadFile(sidecartest.RepoPath(t, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "### From the application: the HTTP API")
	section, _, _ = strings.Cut(section, "\n### ")
	if !strings.Contains(section, "(examples/clients/README.md)") {
		t.Errorf("the README's section From the application does not link examples/clients/README.md")
	}
}
