package process

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestSQLiteFileMovedAwayKeepsItsCommits: two sidecars elect on leader.db
// and a hand-over by SIGTERM brings the token to 2, with both processes
// still holding the file (so its -wal holds every commit since the last
// checkpoint). The file then goes away from the path while the database
// lives on under another name: moved aside, or hard-linked elsewhere and
// the path removed. Both sidecars notice the loss and exit; the database
// is put back at the path and a new sidecar starts on it. The -wal and
// -shm that held the old file's commits must still be there: the record
// and the schema survive, and the new leader's token carries on above 2
// (a token that went back would be issued to a second holder).
func TestSQLiteFileMovedAwayKeepsItsCommits(t *testing.T) {
	t.Parallel()
	aways := []struct {
		name    string
		away    func(path, elsewhere string) error
		putBack func(path, elsewhere string) error
	}{
		{"moved-aside-and-back", os.Rename, func(path, elsewhere string) error { return os.Rename(elsewhere, path) }},
		{"hard-linked-and-removed", func(path, elsewhere string) error {
			if err := os.Link(path, elsewhere); err != nil {
				return err
			}
			return os.Remove(path)
		}, func(path, elsewhere string) error { return os.Link(elsewhere, path) }},
	}
	for _, a := range aways {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path, elsewhere := filepath.Join(dir, "leader.db"), filepath.Join(dir, "leader.db.aside")
			first := sidecartest.Start(t, path)
			sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{first}, 10*time.Second)
			second := sidecartest.Start(t, path)
			first.Signal(syscall.SIGTERM) // released at once: second takes over with token 2
			if code := first.WaitExit(10 * time.Second); code != 0 {
				t.Fatalf("first sidecar: exit status %d after SIGTERM", code)
			}
			sidecartest.AwaitToken(t, []*sidecartest.Sidecar{second}, 2, 10*time.Second)
			third := sidecartest.Start(t, path) // holds the file open beside second
			olds := []*sidecartest.Sidecar{second, third}
			if _, err := os.Stat(path + "-wal"); err != nil {
				t.Fatalf("no -wal beside the live database: %v", err)
			}

			if err := a.away(path, elsewhere); err != nil {
				t.Fatal(err)
			}
			for i, s := range olds {
				if code := s.WaitExit(10 * time.Second); code == 0 {
					t.Fatalf("old sidecar %d: exit status 0 after the file went away, want non-zero", i)
				}
				if logs := s.Logs(); strings.Contains(logs, "removed the old database's") {
					t.Errorf("old sidecar %d removed the -wal or -shm of a database that still exists:\n%s", i, logs)
				}
			}
			if err := a.putBack(path, elsewhere); err != nil {
				t.Fatal(err)
			}
			if holder, token := readRecord(t, path); token != 2 {
				t.Fatalf("the database put back holds holder %q token %d, want token 2: commits were lost", holder, token)
			}
			fresh := sidecartest.Start(t, path)
			_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{fresh}, 2*sidecartest.LeaseDuration+5*time.Second)
			if token != 3 {
				t.Fatalf("the sidecar started on the database put back leads with token %d, want 3 (the token went back)", token)
			}
			t.Logf("after %s: record kept at token 2, next leader token %d", a.name, token)
		})
	}
}

// readRecord reads the one election's holder and token straight from the
// file at path, as a fresh reader (the sqlite3 CLI) would.
func readRecord(t *testing.T, path string) (string, int64) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var (
		holder string
		token  int64
	)
	if err := db.QueryRow("SELECT holder, transitions FROM leader_records").Scan(&holder, &token); err != nil {
		t.Fatalf("reading the record from %s: %v", path, err)
	}
	return holder, token
}
