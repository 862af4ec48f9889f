package process

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestSQLiteFileDeletedOrReplaced: three sidecars elect on leader.db; the
// file is lost under them, deleted with its -wal and -shm or replaced by
// another database renamed over it; a fourth sidecar starts on the path at
// once. All of them are asked GET /leader every 10ms throughout: no sweep
// may have two leader:true answers, and no claim of the old file's terms
// may be sent after the new file's first claim arrived (the new file's
// tokens start again, so its terms are ordered after the old file's).
// The three old processes stop claiming and exit non-zero, each saying why
// and what the path names now; when the old file's -wal and -shm were left
// beside the new file, exactly one of them removes each (never more). The fourth leads
// (token 1 on a new file; one above the other database's token on a
// renamed one, so it read the new file, not the old file's WAL). The old three are then started again on the
// path, as Kubernetes restarts a container, and the fourth stays the one
// leader.
func TestSQLiteFileDeletedOrReplaced(t *testing.T) {
	t.Parallel()
	losses := []struct {
		name, found string
		stale       bool // the old file's -wal and -shm are left for the sidecars to remove
		prepare     func(t *testing.T, path string) (lose func() error, next int64)
	}{
		{"deleted", "is missing", false, deleteDatabase},
		{"replaced", "is now another file", true, replaceDatabase(false)},
		{"replaced-without-wal", "is now another file", false, replaceDatabase(true)},
	}
	for _, l := range losses {
		t.Run(l.name, func(t *testing.T) { databaseLost(t, l.found, l.stale, l.prepare) })
	}
}

// deleteDatabase removes the database and SQLite's files beside it: the
// next process starts a new file, at token 1.
func deleteDatabase(_ *testing.T, path string) (func() error, int64) {
	return func() error { return sidecartest.RemoveDatabase(path) }, 1
}

// otherDatabase makes another election database beside path, by running
// a sidecar on it three times in turn (each releases as it stops), and
// returns the file and the token it left (3: apart from the tokens of the
// file it will replace).
func otherDatabase(t *testing.T, path string) (string, int64) {
	t.Helper()
	other := filepath.Join(filepath.Dir(path), "other.db")
	var token int64
	for range 3 {
		s := sidecartest.Start(t, other)
		_, token = sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 10*time.Second)
		s.Signal(syscall.SIGTERM)
		if code := s.WaitExit(10 * time.Second); code != 0 {
			t.Fatalf("the sidecar on %s: exit status %d after SIGTERM", other, code)
		}
	}
	return other, token
}

// replaceDatabase renames another database over path, as `mv other.db
// leader.db` does, after removing the -wal and -shm beside path when
// dropWAL; the next process takes the other file's released record over
// with the token after it.
func replaceDatabase(dropWAL bool) func(t *testing.T, path string) (func() error, int64) {
	return func(t *testing.T, path string) (func() error, int64) {
		t.Helper()
		other, token := otherDatabase(t, path)
		return func() error {
			for _, p := range []string{path + "-wal", path + "-shm"} {
				if !dropWAL {
					break
				}
				if err := os.Remove(p); err != nil {
					return err
				}
			}
			return os.Rename(other, path)
		}, token + 1
	}
}

func databaseLost(t *testing.T, found string, stale bool, prepare func(*testing.T, string) (func() error, int64)) {
	path := filepath.Join(t.TempDir(), "leader.db")
	lose, next := prepare(t, path)
	old := sidecartest.StartMany(t, path, 3)
	exits := make([]chan time.Time, len(old))
	for i, s := range old {
		exits[i] = make(chan time.Time, 1)
		go func() { <-s.Done(); exits[i] <- time.Now() }()
	}
	_, token := sidecartest.AwaitSettledLeader(t, old, 10*time.Second)

	var set sidecartest.Members
	for i, s := range old {
		set.Add(fmt.Sprintf("old-%d", i), s, 0)
	}
	var log sidecartest.ClaimLog
	halt := log.SweepUntilHalted(sidecartest.SweepEvery, set.All)
	defer halt()
	time.Sleep(300 * time.Millisecond)

	// The file is lost; a new process starts on the path at once.
	at := time.Now()
	if err := lose(); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	fourth := sidecartest.Launch(t, path)
	fourth.WaitServing()
	set.Add("new", fourth, 1)
	newLeader, newToken := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{fourth}, 5*time.Second)
	if newToken != next {
		t.Fatalf("the new process leads with token %d %v after the loss, want %d: it did not read the record of the file now at the path",
			newToken, time.Since(at).Round(time.Millisecond), next)
	}

	// Every old process stops claiming and exits non-zero, saying why; one
	// removes each stale file.
	var exited []time.Duration
	detailed := 0 // logs that also say what the path names now
	removed := map[string]int{path + "-wal": 0, path + "-shm": 0}
	for i, s := range old {
		code := s.WaitExit(10 * time.Second)
		exited = append(exited, (<-exits[i]).Sub(lost).Round(time.Millisecond))
		logs := s.Logs()
		if code == 0 || !strings.Contains(logs, "the election stopped; exiting") ||
			!strings.Contains(logs, "store lost: it was deleted or replaced") || !strings.Contains(logs, path) {
			t.Fatalf("old-%d: exit status %d; want non-zero and a log that the store at %s was lost:\n%s", i, code, path, logs)
		}
		if strings.Contains(logs, found) {
			detailed++
		}
		for p := range removed {
			if strings.Contains(logs, "removed the old database's "+p) {
				removed[p]++
			}
		}
	}
	if detailed != len(old) {
		t.Fatalf("%d of %d old processes logged that the path %s; want all", detailed, len(old), found)
	}
	for p, n := range removed { // deleting by hand races with them: one may remove what is left
		if n > 1 || stale && n != 1 {
			t.Fatalf("%d old processes logged that they removed %s; want one%s", n, p, map[bool]string{false: " at most"}[stale])
		}
	}
	lastOld := log.LastSent(sidecartest.Term{Epoch: 0, Token: token})

	// Kubernetes would restart them: they join the new file as standbys.
	for i := range old {
		set.Add(fmt.Sprintf("restarted-%d", i), sidecartest.Start(t, path), 1)
	}
	var now []*sidecartest.Sidecar
	for _, m := range set.All() {
		if m.Epoch == 1 {
			now = append(now, m.Sidecar)
		}
	}
	sidecartest.AwaitSettled(t, now, newLeader)
	sidecartest.Steady(t, now, newLeader, newToken, sidecartest.LeaseDuration+sidecartest.RetryPeriod)
	if d := at.Add(5 * time.Second).Sub(time.Now()); d > 0 { // sample several seconds in all
		time.Sleep(d)
	}
	end := time.Now()
	halt()

	terms := log.Check(t)
	_, firstNew := log.FirstClaim(sidecartest.Term{Epoch: 1, Token: newToken})
	var names []string
	for _, m := range set.All() {
		if m.Epoch == 1 {
			names = append(names, m.Name)
		}
	}
	if errs := log.Failed(names...); len(errs) > 0 {
		t.Fatalf("live sidecars on the new file did not answer: %v", errs)
	}
	t.Logf("%d sweeps every %v over %v, %d answers; claims per term (file/token) %v; overlaps 0, sweeps with two leaders 0",
		log.Sweeps(), sidecartest.SweepEvery, end.Sub(at).Round(time.Millisecond), log.Asked(), terms)
	t.Logf("old file's token %d last claimed %v after the loss began; old processes exited %v after, %d of 3 logging that the path %s; stale files removed %v; new file's token %d first claimed %v after the loss began",
		token, lastOld.Sub(at).Round(time.Millisecond), exited, detailed, found, removed, newToken, firstNew.Sub(at).Round(time.Millisecond))
}
