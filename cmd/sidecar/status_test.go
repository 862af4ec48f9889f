package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
	"github.com/leader-sidecar/leader-sidecar/pkg/statusview"
)

// The flags of sidecar status are documented in docs/operations.md from
// their definitions, as the sidecar's are in docs/configuration.md.
const (
	operationsDoc         = "../../docs/operations.md"
	regenerateStatusTable = "go test ./cmd/sidecar -run TestStatusDocIsGenerated -update"
	statusTableBegin      = "<!-- generated from the flags of sidecar status by " + regenerateStatusTable + ": begin -->\n"
)

func TestStatusDocIsGenerated(t *testing.T) {
	checkGenerated(t, operationsDoc, statusTableBegin, flagTableEnd, flagTable(newStatusConfig("sidecar status").set), regenerateStatusTable)
}

// Bad usage: one line naming the flag, exit status 2, before any store is
// reached.
func TestStatusRefusesBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "yaml"}, `--output: must be wide or json, got "yaml"`},
		{[]string{"--backend", "etcd"}, "--backend: must be one of lease, sqlite"},
		{[]string{"-n", "a", "-A"}, "--namespace and --all-namespaces: give one of them"},
		{[]string{"-n", "Not_A_Namespace"}, "--namespace: \"Not_A_Namespace\" is not a valid namespace name"},
		{[]string{"-l", "a=(b"}, "--selector:"},
		{[]string{"--sqlite-path", "x.db"}, "--sqlite-path: only with --backend sqlite"},
		{[]string{"--backend", "sqlite"}, "--sqlite-path: required with --backend sqlite"},
		{[]string{"--backend", "sqlite", "--sqlite-path", "x.db", "-A"}, "--all-namespaces: only with --backend lease"},
		{[]string{"--postgres-table", "records"}, "--postgres-table: only with --backend postgres"},
		{[]string{"--backend", "postgres", "-n", "web"}, "--namespace: only with --backend lease"},
		{[]string{"--backend", "postgres", "--postgres-url", "postgres://app:pw@db:notaport/x"}, "--postgres-url:"},
		{[]string{"--request-timeout", "0s"}, "--request-timeout: must be greater than 0"},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"web"}, `unexpected argument "web"`},
	} {
		code, stdout, stderr := runArgs(t, append([]string{"status"}, c.args...))
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "sidecar status: ") || !strings.Contains(stderr, c.want) ||
			strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// Outside a cluster, with no kubeconfig, status says what else it takes,
// not client-go's advice to set KUBERNETES_MASTER.
func TestStatusWithoutAClusterNamesTheLocalBackends(t *testing.T) {
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		t.Fatal("runs outside a Pod: in one, status finds the Pod's service account")
	}
	code, _, stderr := runArgs(t, []string{"status"}) // no KUBECONFIG, no HOME
	if code != 1 || !strings.Contains(stderr, "no kubeconfig found") || !strings.Contains(stderr, "--backend sqlite --sqlite-path <file>") ||
		strings.Contains(stderr, "KUBERNETES_MASTER") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want exit 1 and one line that names --backend sqlite", code, stderr)
	}
}

func TestStatusHelp(t *testing.T) {
	code, stdout, stderr := runArgs(t, []string{"status", "--help"})
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: sidecar status [flags]") ||
		!strings.Contains(stdout, "--all-namespaces") || !strings.Contains(stdout, "never compares clocks") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// Started as kubectl-leader, the first argument is the command; status is
// the one there is, and messages say kubectl leader.
func TestPluginDispatch(t *testing.T) {
	for argv0, want := range map[string]bool{
		"kubectl-leader": true, "/usr/local/bin/kubectl-leader": true, `kubectl-leader.exe`: true,
		"sidecar": false, "/sidecar": false, "kubectl-leader-x": false,
	} {
		if isPlugin(argv0) != want {
			t.Errorf("isPlugin(%q) = %v", argv0, !want)
		}
	}
	plugin := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := executePlugin(context.Background(), process{stdout: &out, stderr: &errOut}, args)
		return code, out.String(), errOut.String()
	}
	if code, _, stderr := plugin(); code != 2 || !strings.Contains(stderr, "kubectl leader status") {
		t.Errorf("no command: exit %d, stderr %q", code, stderr)
	}
	if code, stdout, _ := plugin("help"); code != 0 || !strings.HasPrefix(stdout, "Usage: kubectl leader status") {
		t.Errorf("help: exit %d, stdout %q", code, stdout)
	}
	if code, _, stderr := plugin("lock", "--", "true"); code != 2 || !strings.Contains(stderr, `unknown command "lock"`) {
		t.Errorf("lock: exit %d, stderr %q", code, stderr)
	}
	if code, stdout, _ := plugin("status", "--help"); code != 0 || !strings.HasPrefix(stdout, "Usage: kubectl leader status [flags]") {
		t.Errorf("status --help: exit %d, stdout %q", code, stdout)
	}
	if code, _, stderr := plugin("status", "-o", "yaml"); code != 2 || !strings.HasPrefix(stderr, "kubectl leader status: --output") {
		t.Errorf("status -o yaml: exit %d, stderr %q", code, stderr)
	}
}

// sqliteElection writes an election's record into the SQLite file path.
func sqliteElection(t *testing.T, path, name string, rec backend.Record) *sqlite.Backend {
	t.Helper()
	b, err := sqlite.Open(t.Context(), sqlite.Options{Path: path, Election: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if _, err := b.Create(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	return b
}

// On a real SQLite file: a held election, a stale one (its holder stopped
// renewing a minute ago, its lease 15s) and a released one, as a table
// and as JSON; the stale verdict comes with the note on clocks.
func TestStatusOnSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "elections.db")
	now := time.Now()
	// The ages printed are read at now, however long the run takes (not
	// parallel: no other test reads the clock meanwhile).
	statusClock = func() time.Time { return now }
	t.Cleanup(func() { statusClock = time.Now })
	sqliteElection(t, path, "web", backend.Record{HolderIdentity: "web-0_a", LeaseDurationSeconds: 15, Transitions: 4,
		AcquireTime: now.Add(-time.Hour), RenewTime: now})
	sqliteElection(t, path, "cron", backend.Record{HolderIdentity: "cron-1_b", LeaseDurationSeconds: 15, Transitions: 9,
		AcquireTime: now.Add(-2 * time.Minute), RenewTime: now.Add(-time.Minute)})
	sqliteElection(t, path, "batch", backend.Record{LeaseDurationSeconds: 1, Transitions: 2, AcquireTime: now, RenewTime: now})
	sqliteElection(t, path, shardgroup.MemberRecord("shop", "shop-0_a"), backend.Record{HolderIdentity: "shop-0_a", LeaseDurationSeconds: 15,
		AcquireTime: now.Add(-10 * time.Minute), RenewTime: now})

	code, stdout, stderr := runStatusArgs(t, "--backend", "sqlite", "--sqlite-path", path)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	want := [][]string{
		{"NAME", "HOLDER", "TOKEN", "TERM", "RENEWED", "LEASE", "HANDOFF", "STATE"},
		{"batch", "<none>", "2", "-", "-", "-", "-", "released"},
		{"cron", "cron-1_b", "9", "2m0s", "1m0s", "ago", "15s", "-", "stale"},
		{"shop-member-shop-0-a", "shop-0_a", "0", "10m0s", "*", "ago", "15s", "-", "member"},
		{"web", "web-0_a", "4", "1h0m", "*", "ago", "15s", "-", "held"},
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", stdout)
	}
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) != len(want[i]) {
			t.Fatalf("line %q, want %q", l, want[i])
		}
		for j := range f {
			if want[i][j] != "*" && f[j] != want[i][j] {
				t.Fatalf("line %q, want %q", l, want[i])
			}
		}
	}
	if !strings.Contains(stderr, statusview.StaleNote) {
		t.Fatalf("no note on the stale row in stderr %q", stderr)
	}

	code, stdout, stderr = runStatusArgs(t, "--backend", "sqlite", "--sqlite-path", path, "-o", "json")
	var got statusview.List
	if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || len(got.Elections) != 4 {
		t.Fatalf("-o json: exit %d, %v, stdout %q, stderr %q", code, err, stdout, stderr)
	}
	cron := got.Elections[1]
	if cron.Name != "cron" || cron.Holder != "cron-1_b" || cron.Token != 9 || !cron.Stale || cron.State != statusview.StateStale ||
		cron.SinceRenewalSeconds == nil || *cron.SinceRenewalSeconds < 60 || cron.LeaseDurationSeconds != 15 || cron.Namespace != "" {
		t.Fatalf("-o json, cron: %+v", cron)
	}

	code, _, stderr = runStatusArgs(t, "--backend", "sqlite", "--sqlite-path", filepath.Join(t.TempDir(), "none.db"))
	if code != 1 || !strings.Contains(stderr, "does not exist") {
		t.Fatalf("a missing file: exit %d, stderr %q", code, stderr)
	}
}

// --watch on a real SQLite file prints the list, then the election's row
// again when leadership moves, and exits 0 when stopped.
func TestStatusWatchOnSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "elections.db")
	now := time.Now()
	b := sqliteElection(t, path, "web", backend.Record{HolderIdentity: "web-0_a", LeaseDurationSeconds: 15, Transitions: 4,
		AcquireTime: now, RenewTime: now})
	var out syncBuffer
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"status", "--backend", "sqlite", "--sqlite-path", path, "--watch"}, nil, &out, &out)
	}()
	awaitOutput(t, &out, "web-0_a")
	_, v, err := b.Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	now = time.Now()
	if _, err := b.Update(t.Context(), v, backend.Record{HolderIdentity: "web-1_b", LeaseDurationSeconds: 15, Transitions: 5,
		AcquireTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}
	awaitOutput(t, &out, "web-1_b")
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[1], " 4 ") || !strings.Contains(lines[2], " 5 ") {
		t.Fatalf("output, want a header and two rows:\n%s", out.String())
	}
}

// runStatusArgs runs sidecar status with args to its end.
func runStatusArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), append([]string{"status"}, args...), nil, &out, &errOut)
	return code, out.String(), errOut.String()
}

// awaitOutput waits up to 10s for want in out.
func awaitOutput(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 10s in:\n%s", want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer that a command writes while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
