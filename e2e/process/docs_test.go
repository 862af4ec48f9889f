package process

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The commands and answers that docs/ shows, run as they are written
// against the real binary.

// docBlocks returns the shell blocks (```sh) of the page docs/name.
func docBlocks(t *testing.T, name string) []string {
	t.Helper()
	return shellBlocks(t, "docs", name)
}

// shellBlocks returns the shell blocks (```sh) of the repository's file
// at path.
func shellBlocks(t *testing.T, path ...string) []string {
	t.Helper()
	raw, err := os.ReadFile(sidecartest.RepoPath(t, path...))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) == 0 {
		t.Fatalf("%s shows no sh block", filepath.Join(path...))
	}
	return blocks
}

// blockStarting is the one block of blocks whose first line is first.
func blockStarting(t *testing.T, blocks []string, first string) []string {
	t.Helper()
	for _, b := range blocks {
		if lines := strings.Split(strings.TrimRight(b, "\n"), "\n"); lines[0] == first {
			return lines
		}
	}
	t.Fatalf("no shell block starts with %q", first)
	return nil
}

// transcript splits a block that shows a session ("$ command" lines, each
// followed by what it prints) into its commands and the output it shows.
func transcript(lines []string) (commands []string, shown string) {
	for _, l := range lines {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			commands = append(commands, c)
		} else {
			shown += l + "\n"
		}
	}
	return commands, shown
}

// docLines are the commands of blocks that start with prefix.
func docLines(blocks []string, prefix string) []string {
	var lines []string
	for _, b := range blocks {
		for line := range strings.SplitSeq(b, "\n") {
			if strings.HasPrefix(line, prefix) {
				lines = append(lines, line)
			}
		}
	}
	return lines
}

// Both commands of docs/lock.md run as written, with /var/lib/jobs a
// directory of the test's and the page's scripts ones that record their
// arguments: each lock leads on a fresh file, runs its script with the
// arguments given, and exits 0.
func TestLockPageCommands(t *testing.T) {
	t.Parallel()
	lines := docLines(docBlocks(t, "lock.md"), "sidecar lock ")
	if len(lines) != 2 {
		t.Fatalf("docs/lock.md shows %d sidecar lock commands, want 2: %q", len(lines), lines)
	}
	for _, line := range lines {
		work, jobs := t.TempDir(), t.TempDir()
		script := regexp.MustCompile(`-- \./(\S+)`).FindStringSubmatch(line)
		if script == nil {
			t.Fatalf("%q runs no ./script", line)
		}
		ran := filepath.Join(work, "ran")
		body := "#!/bin/sh\necho \"$LEADER_SIDECAR_TOKEN $*\" >" + ran + "\n"
		if err := os.WriteFile(filepath.Join(work, script[1]), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		command := sidecartest.Binary(t) + strings.TrimPrefix(line, "sidecar")
		command = strings.ReplaceAll(command, "/var/lib/jobs/", jobs+"/")
		cmd := exec.Command("sh", "-c", command)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		got, err := os.ReadFile(ran)
		if err != nil {
			t.Fatalf("%s: the script did not run: %v", line, err)
		}
		args := strings.TrimSpace(line[strings.Index(line, script[0])+len(script[0]):])
		if want := strings.TrimSpace("1 " + args); strings.TrimSpace(string(got)) != want {
			t.Fatalf("%s: the script got %q, want token and arguments %q", line, got, want)
		}
	}
}

// The answers docs/http-api.md shows have the fields, and the framing, of a
// real sidecar's.
func TestHTTPAPIPageAnswers(t *testing.T) {
	t.Parallel()
	blocks := docBlocks(t, "http-api.md")
	shown := map[string]string{} // command -> the answer's first line
	for _, b := range blocks {
		lines := strings.Split(strings.TrimSpace(b), "\n")
		if len(lines) > 1 && strings.HasPrefix(lines[0], "$ curl") {
			shown[strings.Fields(lines[0])[len(strings.Fields(lines[0]))-1]] = lines[1]
		}
	}
	leaderShown, watchShown := shown["localhost:4040/leader"], shown["localhost:4040/leader/watch"]
	if leaderShown == "" || watchShown == "" {
		t.Fatalf("docs/http-api.md shows answers for %q, want /leader and /leader/watch", slices.Sorted(maps.Keys(shown)))
	}
	var shownFields map[string]any
	if err := json.Unmarshal([]byte(leaderShown), &shownFields); err != nil {
		t.Fatalf("the page's /leader answer is not JSON: %v\n%s", err, leaderShown)
	}

	s := sidecartest.Start(t, sidecartest.DBPath(t))
	sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 10*time.Second)
	resp, err := http.Get("http://" + s.Addr() + "/leader")
	if err != nil {
		t.Fatal(err)
	}
	var realFields map[string]any
	err = json.NewDecoder(resp.Body).Decode(&realFields)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if a, b := slices.Sorted(maps.Keys(shownFields)), slices.Sorted(maps.Keys(realFields)); !slices.Equal(a, b) {
		t.Fatalf("the page's /leader answer has the fields %q, a sidecar's %q", a, b)
	}
	for k, v := range shownFields {
		if v != nil && realFields[k] != nil && typeName(v) != typeName(realFields[k]) {
			t.Errorf("field %q: the page shows a %s, a sidecar answers a %s", k, typeName(v), typeName(realFields[k]))
		}
	}

	resp, err = http.Get("http://" + s.Addr() + "/leader/watch")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if prefix := watchShown[:strings.Index(watchShown, "{")]; !strings.HasPrefix(first, prefix+"{") {
		t.Fatalf("the page's watch event starts %q, a sidecar's is %q", prefix, first)
	}
}

func typeName(v any) string {
	switch v.(type) {
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	default:
		return "object"
	}
}

// The SQLite statement docs/backends.md gives for raising the stored token
// does what the page says: run on the file of a leading sidecar, the
// leader's next term has the token one above the value set.
func TestBackendsPageTokenRaise(t *testing.T) {
	t.Parallel()
	lines := docLines(docBlocks(t, "backends.md"), "sqlite3 ")
	if len(lines) != 1 {
		t.Fatalf("docs/backends.md shows %d sqlite3 commands, want 1: %q", len(lines), lines)
	}
	m := regexp.MustCompile(`^sqlite3 (\S+) "(.*)"$`).FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("cannot read %q as sqlite3 FILE \"STATEMENT\"", lines[0])
	}
	set := regexp.MustCompile(`transitions = (\d+)`).FindStringSubmatch(m[2])
	if set == nil {
		t.Fatalf("%q sets no transitions", m[2])
	}
	// The page's file name is the sidecar's default path: the test runs the
	// sidecar in a directory of its own with its defaults.
	dir := t.TempDir()
	cmd := exec.Command(sidecartest.Binary(t), append([]string{"--http-address", "127.0.0.1:0", "--log-format", "json", "--log-level", "info"},
		sidecartest.TimingArgs()...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	s := sidecartest.Track(t, cmd)
	s.WaitServing()
	all := []*sidecartest.Sidecar{s}
	sidecartest.AwaitToken(t, all, 1, 10*time.Second)

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, m[1])+"?mode=rw&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(m[2])
	if err != nil {
		t.Fatalf("%s: %v", m[2], err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s changed %d rows, want the election's one", m[2], n)
	}
	var want int64
	for _, c := range set[1] {
		want = want*10 + int64(c-'0')
	}
	sidecartest.AwaitToken(t, all, want+1, 10*sidecartest.LeaseDuration)
}

// Every file or folder of the repository that the README, docs/, the
// charts and the package docs name exists, and every Go function a chart
// template names as the source of a rule it mirrors ("As Type.method
// (cmd/sidecar/file.go)") is defined in the file named: a renamed or moved
// file cannot leave a page pointing at nothing.
func TestCitedFilesExist(t *testing.T) {
	t.Parallel()
	root := sidecartest.RepoPath(t)
	var texts []string
	for _, top := range []string{"README.md", "docs", "charts", "cmd", "pkg", "e2e", "internal", "examples"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch ext := filepath.Ext(path); {
			case ext == ".md", ext == ".tpl", ext == ".yaml" && strings.Contains(path, "/charts/"), filepath.Base(path) == "doc.go":
				texts = append(texts, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	repoPath := regexp.MustCompile(`(?:^|[\s(\x60"'])((?:cmd|pkg|e2e|internal|hack|charts|docs|examples)/[\w./*-]*[\w*-])`)
	link := regexp.MustCompile(`\]\((\.\.?/[^)#\s]+)`)
	mirror := regexp.MustCompile(`As (\w+)\.(\w+) \((cmd/[\w/]+\.go)\)`)
	exists := func(p string) bool { // a path, or a pattern that matches one
		matches, err := filepath.Glob(p)
		return err == nil && len(matches) > 0
	}
	cited := 0
	for _, file := range texts {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for _, m := range repoPath.FindAllStringSubmatch(string(raw), -1) {
			p := strings.TrimSuffix(m[1], ".")
			if strings.Contains(p, "vX.Y.Z") { // a release tag's form, not a path
				continue
			}
			cited++
			if !exists(filepath.Join(root, p)) {
				t.Errorf("%s names %s, which the repository does not have", rel, p)
			}
		}
		for _, m := range link.FindAllStringSubmatch(string(raw), -1) {
			cited++
			if !exists(filepath.Join(filepath.Dir(file), m[1])) {
				t.Errorf("%s links to %s, which the repository does not have", rel, m[1])
			}
		}
		for _, m := range mirror.FindAllStringSubmatch(string(raw), -1) {
			cited++
			src, err := os.ReadFile(filepath.Join(root, m[3]))
			def := regexp.MustCompile(`func \(\w+ \*?` + m[1] + `\) ` + m[2] + `\(`)
			if err != nil || !def.Match(src) {
				t.Errorf("%s mirrors %s.%s of %s, which is not defined there", rel, m[1], m[2], m[3])
			}
		}
	}
	t.Logf("%d files, %d citations", len(texts), cited)
}

// The README's first run, as written: the build, three sidecars on ports
// 4040-4042 in one directory, and the loop that asks all three: one
// answers "leader": true and all name it. Then, as the next paragraph
// says, the leader stopped with Ctrl-C (SIGINT) releases the lease and
// another takes over with the token one higher.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	lines := blockStarting(t, shellBlocks(t, "README.md"), "go build -o sidecar ./cmd/sidecar")
	dir := t.TempDir()
	env := []string{"PATH=" + filepath.Dir(sidecartest.GoTool()) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME")}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOPROXY"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	// The build runs in the repository, as the README's reader does, and
	// writes the binary into the test's directory instead of the work tree.
	build := exec.Command("sh", "-c", strings.Replace(lines[0], "-o sidecar", "-o "+filepath.Join(dir, "sidecar"), 1))
	build.Dir, build.Env = sidecartest.RepoPath(t), env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", lines[0], err, out)
	}

	var ask string
	sidecars := map[string]*exec.Cmd{} // port -> its sidecar
	for _, line := range lines[1:] {
		switch {
		case strings.HasPrefix(line, "./sidecar "):
			port := line[strings.LastIndex(line, ":")+1:]
			cmd := exec.Command("sh", "-c", "exec "+line)
			cmd.Dir, cmd.Env = dir, env
			logs := &sidecartest.LockedBuffer{}
			cmd.Stdout, cmd.Stderr = logs, logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				if t.Failed() {
					t.Logf("%s:\n%s", line, logs.String())
				}
			})
			sidecars[port] = cmd
		case strings.HasPrefix(line, "for p in "):
			ask = line
		}
	}
	if len(sidecars) != 3 || ask == "" {
		t.Fatalf("the README's first run starts %d sidecars and asks with %q, want 3 and a loop", len(sidecars), ask)
	}

	// askAll runs the README's loop until exactly one of the ports that
	// answer says "leader": true and every answer names it, and returns the
	// leader's port and token.
	askAll := func(want int) (string, int64) {
		t.Helper()
		var out []byte
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			cmd := exec.Command("sh", "-c", ask)
			cmd.Env = env
			var err error
			if out, err = cmd.Output(); err != nil {
				t.Fatalf("%s: %v", ask, err)
			}
			leader, token, holders, answers := "", int64(0), map[string]bool{}, 0
			for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
				port, body, _ := strings.Cut(line, " ")
				if body == "" {
					continue // a stopped sidecar: curl printed nothing
				}
				var st sidecartest.State
				if err := json.Unmarshal([]byte(body), &st); err != nil {
					t.Fatalf("port %s answered %q: %v", port, body, err)
				}
				answers++
				holders[st.Holder] = true
				if st.Leader {
					if leader != "" {
						t.Fatalf("ports %s and %s both answered \"leader\": true:\n%s", leader, port, out)
					}
					leader, token = port, *st.Token
					if st.Holder != st.Identity {
						t.Fatalf("the leader on port %s names %q the holder, itself %q", port, st.Holder, st.Identity)
					}
				}
			}
			if answers == want && leader != "" && len(holders) == 1 {
				return leader, token
			}
		}
		t.Fatalf("%s never showed %d answers, one leader and one holder named by all; last:\n%s", ask, want, out)
		return "", 0
	}
	leader, token := askAll(3)
	if err := sidecars[leader].Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := sidecars[leader].Wait(); err != nil {
		t.Fatalf("the leader stopped with Ctrl-C exited with %v", err)
	}
	next, nextToken := askAll(2)
	if next == leader || nextToken != token+1 {
		t.Fatalf("after Ctrl-C on port %s (token %d): port %s leads with token %d, want another with token %d",
			leader, token, next, nextToken, token+1)
	}
}

// The session docs/configuration.md shows, run as written: sidecar check
// with the app health URL the page gives prints the page's error and exits
// with status 2.
func TestConfigurationPageCheck(t *testing.T) {
	t.Parallel()
	commands, shown := transcript(blockStarting(t, docBlocks(t, "configuration.md"),
		"$ LEADER_SIDECAR_APP_HEALTH_URL=http://10.0.0.7:8080/healthz sidecar check"))
	script := strings.ReplaceAll(strings.Join(commands, "\n"), " sidecar check", " "+sidecartest.Binary(t)+" check")
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	if string(out) != shown {
		t.Fatalf("docs/configuration.md shows\n%s\nthe sidecar printed\n%s", shown, out)
	}
}

// The hand-off session docs/handoff.md shows, on two sidecars named as the
// page's Pods: `sidecar handoff --to web-5c2a` in the leader's container
// (which finds the API through LEADER_SIDECAR_HTTP_ADDRESS) prints the
// page's line and moves the lease; then the two curl commands, each sent
// to the leader of the moment: to any standby, and to web-5c2a by name.
// Every move gives the token one higher.
func TestHandoffPageCommands(t *testing.T) {
	t.Parallel()
	commands, shown := transcript(blockStarting(t, docBlocks(t, "handoff.md"),
		"$ kubectl exec web-7d9f -c leader-sidecar -- /sidecar handoff --to web-5c2a"))
	if len(commands) != 3 || !strings.Contains(commands[1], `"to": "web-5c2a"`) || strings.Contains(commands[2], " -d ") {
		t.Fatalf("docs/handoff.md shows %q; want sidecar handoff, a curl to web-5c2a and one to any standby", commands)
	}
	// Named as the chart names them, by their Pods' names: the sidecar
	// makes the identity "<Pod name>_<random>".
	db := sidecartest.DBPath(t)
	old := sidecartest.Start(t, db, "--identity", "web-7d9f")
	sidecartest.AwaitToken(t, []*sidecartest.Sidecar{old}, 1, 10*time.Second)
	target := sidecartest.Start(t, db, "--identity", "web-5c2a")
	all := []*sidecartest.Sidecar{old, target}
	sidecartest.AwaitSettled(t, all, old)

	// kubectl exec <pod> -c leader-sidecar -- runs the rest in the
	// leader's sidecar container, whose environment names its API.
	_, inContainer, ok := strings.Cut(commands[0], " -- ")
	if !ok {
		t.Fatalf("%q runs nothing in the container", commands[0])
	}
	cmd := exec.Command("sh", "-c", strings.Replace(inContainer, "/sidecar", sidecartest.Binary(t), 1))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LEADER_SIDECAR_HTTP_ADDRESS=" + old.Addr()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", inContainer, err, out)
	}
	// The page cuts the identity's random part short ("web-5c2a_3f1e0b2d-...").
	parts := regexp.MustCompile(`_[0-9a-f]+-\.\.\.`).Split(shown, -1)
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	if len(parts) != 2 {
		t.Fatalf("the page's answer %q names no identity cut short", shown)
	}
	if !regexp.MustCompile("^" + strings.Join(parts, `_[0-9a-f-]{36}`) + "$").Match(out) {
		t.Fatalf("%s printed %q, the page shows %q", inContainer, out, shown)
	}
	sidecartest.AwaitToken(t, all, 2, 5*time.Second)
	if st, err := target.Leader(); err != nil || !st.Leader || *st.Token != 2 {
		t.Fatalf("after the hand-off web-5c2a answers %+v, %v; want leader with token 2", st, err)
	}

	// The curl commands as written, sent to the leader's address: the
	// one without a target first (the only standby is web-7d9f), then the
	// one to web-5c2a.
	for i, c := range []struct {
		command string
		from    *sidecartest.Sidecar
		to      *sidecartest.Sidecar
	}{{commands[2], target, old}, {commands[1], old, target}} {
		line, _, _ := strings.Cut(c.command, "#")
		cmd := exec.Command("sh", "-c", strings.Replace(line, "localhost:4040", c.from.Addr(), 1))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		want := int64(3 + i)
		sidecartest.AwaitToken(t, all, want, 5*time.Second)
		if st, err := c.to.Leader(); err != nil || !st.Leader || *st.Token != want {
			t.Fatalf("after %s: %s answers %+v, %v; want leader with token %d", line, c.to.Addr(), st, err, want)
		}
	}
}

// The README's set-up is two commands, one to try the sidecar and one to
// run the unit tests, each a command that exists (make unit is a target
// of the Makefile, checked with make -n), and the paragraph under them is
// short: the whole suite and what it installs are in docs/development.md.
func TestReadmeSetUp(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(sidecartest.RepoPath(t, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, start, ok := strings.Cut(string(raw), "## Quick start\n")
	if !ok {
		t.Fatal("the README has no Quick start")
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```\n\n(.*?)\n\n").FindStringSubmatch(start)
	if m == nil {
		t.Fatal("the README's Quick start has no sh block followed by a paragraph")
	}
	var commands []string
	for line := range strings.SplitSeq(strings.TrimSpace(m[1]), "\n") {
		command, _, _ := strings.Cut(line, "#")
		commands = append(commands, strings.TrimSpace(command))
	}
	if want := []string{"go run ./cmd/sidecar", "make unit"}; !slices.Equal(commands, want) {
		t.Fatalf("the README's set-up is %q, want the two commands %q", commands, want)
	}
	cmd := exec.Command("make", "-n", "unit")
	cmd.Dir = sidecartest.RepoPath(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make -n unit: %v\n%s", err, out)
	}
	if lines := strings.Count(m[2], "\n") + 1; lines > 6 {
		t.Errorf("the paragraph under the set-up is %d lines, want at most 6:\n%s", lines, m[2])
	}
}

// The README's Documentation table and docs/README.md index the same
// pages, every page of docs/, and say the same of each (what is in the
// charts, say); docs/README.md links the README of every chart: the
// README says docs/README.md is the same index.
func TestDocIndexesAgree(t *testing.T) {
	t.Parallel()
	read := func(path ...string) string {
		raw, err := os.ReadFile(sidecartest.RepoPath(t, path...))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	rows := func(text, prefix string) []string { // the pages of a table's first column
		var pages []string
		for _, m := range regexp.MustCompile(`(?m)^\| \[[^]]+\]\(`+regexp.QuoteMeta(prefix)+`([\w-]+\.md)\)`).FindAllStringSubmatch(text, -1) {
			pages = append(pages, m[1])
		}
		slices.Sort(pages)
		return pages
	}
	_, readmeIndex, _ := strings.Cut(read("README.md"), "\n## Documentation\n")
	readmeIndex, _, _ = strings.Cut(readmeIndex, "\n## ")
	index := read("docs", "README.md")
	fromReadme, fromDocs := rows(readmeIndex, "docs/"), rows(index, "")
	var all []string
	entries, err := os.ReadDir(sidecartest.RepoPath(t, "docs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".md") && e.Name() != "README.md" {
			all = append(all, e.Name())
		}
	}
	if !slices.Equal(fromReadme, all) {
		t.Errorf("the README indexes %q, docs/ has %q", fromReadme, all)
	}
	if !slices.Equal(fromDocs, all) {
		t.Errorf("docs/README.md indexes %q, docs/ has %q", fromDocs, all)
	}
	covers := func(text string) map[string]string { // page -> what it covers
		m := map[string]string{}
		for _, r := range regexp.MustCompile(`(?m)^\| \[[^]]+\]\(([\w-]+\.md)\) \| (.*) \|$`).FindAllStringSubmatch(text, -1) {
			m[r[1]] = r[2]
		}
		return m
	}
	fromDocsCovers := covers(index)
	for page, what := range covers(strings.ReplaceAll(readmeIndex, "(docs/", "(")) {
		if fromDocsCovers[page] != what {
			t.Errorf("%s: the README says it covers\n\t%s\ndocs/README.md\n\t%s", page, what, fromDocsCovers[page])
		}
	}
	charts, err := filepath.Glob(sidecartest.RepoPath(t, "charts", "*", "README.md"))
	if err != nil || len(charts) == 0 {
		t.Fatalf("no chart READMEs: %v", err)
	}
	for _, c := range charts {
		link := "(../charts/" + filepath.Base(filepath.Dir(c)) + "/README.md)"
		if !strings.Contains(index, link) {
			t.Errorf("docs/README.md does not link %s", link)
		}
	}
}

// The README's Numbers table gives one figure per cell (a unit, or
// "about", beside it), so that a reader compares two columns at a glance;
// what qualifies a figure goes in the row's name or the text.
func TestReadmeNumbersOneFigurePerCell(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(sidecartest.RepoPath(t, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Numbers\n")
	if !ok {
		t.Fatal("the README has no Numbers section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	figure := regexp.MustCompile(`^((about )?[0-9][0-9,]*(\.[0-9]+)?( ms| MiB|%)?)?$`)
	rows := 0
	for line := range strings.SplitSeq(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| |") {
			continue
		}
		rows++
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for _, cell := range cells[1:] {
			if cell = strings.TrimSpace(cell); !figure.MatchString(cell) {
				t.Errorf("the Numbers table's row %q has the cell %q, want one figure", strings.TrimSpace(cells[0]), cell)
			}
		}
	}
	if rows < 10 {
		t.Fatalf("the Numbers table has %d rows, want the table", rows)
	}
}
