package apiserver

import (
	"database/sql"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestSplitBrain reproduces the story fencing tokens exist for, with real
// processes: replica A (a sidecar and examples/worker next to it) leads with
// token t and its worker has read t and is about to write; A's worker and
// sidecar are frozen with SIGSTOP until replica B has taken over with t+1
// and written; then A's worker wakes and makes its pending write. With the
// guard the late write is refused and B's result survives; without it
// (--unguarded) A's result with token t overwrites B's: the test asserts
// that loss too, so the scenario is known to be real.
//
// A's worker runs with --hold-file: it waits between reading its token and
// opening its write transaction until the file exists. The test freezes it
// there, so where A stops, and that A writes after B, do not depend on
// timing; only B's takeover waits out the lease, which is the point.
func TestSplitBrain(t *testing.T) {
	t.Parallel()
	backends := []struct {
		name string
		// election prepares one election and returns how to start a
		// sidecar in it as the Pod pod, and the store's files, if any.
		election func(t *testing.T) (func(pod string) *sidecartest.Sidecar, []string)
	}{
		{"sqlite", func(t *testing.T) (func(string) *sidecartest.Sidecar, []string) {
			db := sidecartest.DBPath(t)
			return func(string) *sidecartest.Sidecar { return sidecartest.Start(t, db) }, []string{db}
		}},
		{"lease", func(t *testing.T) (func(string) *sidecartest.Sidecar, []string) {
			k := sidecartest.Kube(t)
			ns, kc := k.Namespace(t), k.Kubeconfig(t, "")
			return func(pod string) *sidecartest.Sidecar { return sidecartest.LeaseSidecar(t, kc, ns, "billing", pod) }, nil
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for _, guarded := range []bool{true, false} {
				name := map[bool]string{true: "guarded", false: "unguarded"}[guarded]
				t.Run(name, func(t *testing.T) {
					newSidecar, files := b.election(t)
					splitBrain(t, newSidecar, files, guarded)
				})
			}
		})
	}
}

func splitBrain(t *testing.T, newSidecar func(pod string) *sidecartest.Sidecar, storeFiles []string, guarded bool) {
	dir := t.TempDir()
	results := filepath.Join(dir, "results.db")
	release := filepath.Join(dir, "a-may-write")
	var mode []string
	if !guarded {
		mode = []string{"--unguarded"}
	}

	// A leads alone; its first job takes the token and is held before writing.
	a := replica(t, "a", newSidecar, results, append(mode, "--hold-file", release)...)
	_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{a.sidecar}, 15*time.Second)
	pending := a.worker.Await(t, "A's job to take its token", 10*time.Second, func(e workerEvent) bool {
		return e.Event == "about-to-write" && e.Token == token
	})
	b := replica(t, "b", newSidecar, results, mode...)
	if leader, _ := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{a.sidecar, b.sidecar}, 5*time.Second); leader != a.sidecar {
		t.Fatal("B leads before A was frozen")
	}

	// Freeze A mid-write, past the lease: B takes over and writes. A's
	// sidecar is frozen outside a write of the store's file: inside one it
	// would hold B out of the file (a store outage, not a paused leader).
	a.worker.Signal(t, syscall.SIGSTOP)
	sidecartest.StopOutsideWrites(t, func() { a.sidecar.Signal(syscall.SIGSTOP) }, func() { a.sidecar.Signal(syscall.SIGCONT) },
		[]int{a.sidecar.Pid()}, storeFiles...)
	frozen := time.Now()
	_, next := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{b.sidecar}, 3*sidecartest.LeaseDuration)
	takeover := time.Since(frozen)
	if next != token+1 {
		t.Fatalf("B leads with token %d, want %d", next, token+1)
	}
	// A's last renewal was at most a renew interval (plus a retry period
	// of slack) before the freeze; a release would have been taken over in
	// milliseconds.
	if takeover < sidecartest.LeaseDuration-sidecartest.RenewInterval-sidecartest.RetryPeriod {
		t.Fatalf("B took over %v after A froze, before A's lease could have run out", takeover)
	}
	bWrite := b.worker.Await(t, "B's write", 10*time.Second, func(e workerEvent) bool {
		return e.Event == "write" && e.Token == next
	})
	bRow := resultRow{bWrite.Value, "b", next}
	if !bWrite.Accepted {
		t.Fatalf("B's write with token %d refused: %s", next, bWrite.Error)
	}
	if got := readResult(t, results); got != bRow {
		t.Fatalf("after B's write the results row is %+v, want %+v", got, bRow)
	}
	// From here on only A's late write can change the row. B's worker may
	// write again (its next job) before the signal reaches it: the row is
	// then B's later write, with the same token.
	b.worker.Signal(t, syscall.SIGTERM)
	if code := b.worker.WaitExit(t, 10*time.Second); code != 0 {
		t.Fatalf("B's worker: exit status %d after SIGTERM, want 0", code)
	}
	if last := readResult(t, results); last.Writer != "b" || last.Token != next {
		t.Fatalf("after B's worker stopped the results row is %+v, want one of B's writes with token %d", last, next)
	} else {
		bRow = last
	}

	// A wakes: first its worker, while its sidecar is still frozen (nothing
	// the sidecar could say reaches a job that is past its check).
	answer := queueLeaderRequest(t, a.sidecar.Addr())
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a.worker.Signal(t, syscall.SIGCONT)
	aWrite := a.worker.Await(t, "A's pending write", 10*time.Second, func(e workerEvent) bool {
		return e.Event == "write"
	})
	if aWrite.Token != token || aWrite.Value != pending.Value {
		t.Fatalf("A's first write: token %d value %q, want the held job's %d %q", aWrite.Token, aWrite.Value, token, pending.Value)
	}
	final := readResult(t, results)
	if guarded {
		if aWrite.Accepted || !aWrite.Stale || !strings.Contains(aWrite.Error, "stale token") {
			t.Fatalf("A's late write with token %d: accepted=%v stale=%v error %q; want refused as stale",
				token, aWrite.Accepted, aWrite.Stale, aWrite.Error)
		}
		if final != bRow {
			t.Fatalf("results row %+v after A's refused write, want B's %+v", final, bRow)
		}
	} else {
		aRow := resultRow{aWrite.Value, "a", token}
		if !aWrite.Accepted || final != aRow {
			t.Fatalf("unguarded: A's late write accepted=%v (%s), row %+v; want A's %+v over B's: the loss did not happen",
				aWrite.Accepted, aWrite.Error, final, aRow)
		}
	}

	// A's sidecar wakes: its first answer disowns the term.
	a.sidecar.Signal(syscall.SIGCONT)
	if reply := answer(); !strings.Contains(reply, `"leader":false`) || !strings.Contains(reply, `"token":null`) {
		t.Fatalf("A's sidecar, first answer after waking:\n%s\nwant leader:false with a null token", reply)
	}
	if leader, tok := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{a.sidecar, b.sidecar}, 5*time.Second); leader != b.sidecar || tok != next {
		t.Fatalf("after A woke the leader has token %d, want B with %d", tok, next)
	}

	t.Logf("A led with token %d and froze mid-write; B took over %v later with token %d (lease %v)",
		token, takeover.Round(time.Millisecond), next, sidecartest.LeaseDuration)
	t.Logf("B wrote %q with token %d; A's late write %q with token %d: accepted=%v; final row %+v",
		bWrite.Value, next, aWrite.Value, token, aWrite.Accepted, final)
}

// replicaProcs is one Pod of the scenario: a sidecar and the worker next
// to it.
type replicaProcs struct {
	sidecar *sidecartest.Sidecar
	worker  *workerProc
}

// replica starts the sidecar of the Pod name, then examples/worker on it,
// writing to the SQLite file results with the extra worker flags.
func replica(t *testing.T, name string, newSidecar func(pod string) *sidecartest.Sidecar, results string, extra ...string) *replicaProcs {
	t.Helper()
	s := newSidecar(name)
	args := append([]string{"--sidecar", "http://" + s.Addr(), "--db", results, "--name", name,
		"--resource", "billing", "--interval", "200ms"}, extra...)
	return &replicaProcs{sidecar: s, worker: startWorker(t, args...)}
}

// resultRow is the workers' results row of the resource billing.
type resultRow struct {
	Value, Writer string
	Token         int64
}

func readResult(t *testing.T, path string) resultRow {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var r resultRow
	err = db.QueryRow(`SELECT value, writer, token FROM results WHERE resource = 'billing'`).Scan(&r.Value, &r.Writer, &r.Token)
	if err != nil {
		t.Fatalf("reading the results row: %v", err)
	}
	return r
}

// queueLeaderRequest sends GET /leader to addr at once and returns a
// function that reads the answer. Sent to a frozen sidecar, the request
// waits in the kernel, and the answer is made only after the process wakes.
func queueLeaderRequest(t *testing.T, addr string) func() string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte("GET /leader HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	return func() string {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		reply, err := io.ReadAll(conn)
		if err != nil {
			t.Fatalf("reading the answer to GET /leader: %v (got %q)", err, reply)
		}
		return string(reply)
	}
}
