package e2e

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

func TestSIGINTReleasesAndExitsZero(t *testing.T) {
	all := startMany(t, dbPath(t), 2)
	old, token := awaitLeader(t, all, 10*time.Second)
	old.signal(syscall.SIGINT)
	if code := old.waitExit(10 * time.Second); code != 0 {
		t.Fatalf("SIGINT: exit status %d, want 0", code)
	}
	if _, next := awaitLeader(t, without(all, old), time.Second); next != token+1 {
		t.Fatalf("token after SIGINT hand-off %d, want %d", next, token+1)
	}
}

// holdWriteLock takes SQLite's write lock on db from this process, as a
// stuck writer would, until the returned function is called.
func holdWriteLock(t *testing.T, db string) func() {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE leader_records SET name = name WHERE 0"); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(); _ = conn.Close() }
}

func TestSecondSignalExitsAtOnce(t *testing.T) {
	db := dbPath(t)
	s := start(t, db, "--sqlite-busy-timeout", "1m")
	awaitLeader(t, []*sidecar{s}, 10*time.Second)
	unlock := holdWriteLock(t, db)
	defer unlock()

	s.signal(syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.logs.String(), "shutting down") {
		if time.Now().After(deadline) {
			t.Fatal("no shutdown logged after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if !s.alive() || strings.Contains(s.logs.String(), `"msg":"stopped"`) {
		t.Fatal("the sidecar finished its shutdown although its release could not be written")
	}
	s.signal(syscall.SIGTERM)
	if code := s.waitExit(time.Second); code != 1 {
		t.Fatalf("second signal: exit status %d, want 1", code)
	}
}

func TestBadStartsExitWithTheirStatus(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		args    []string
		code    int
		mention string
	}{
		{"invalid flag value", []string{"--retry-period", "0s"}, 2, "--retry-period: must be greater than 0"},
		{"missing directory", []string{"--sqlite-path", filepath.Join(dir, "nope", "x.db")}, 1, "--sqlite-path: sqlite: open"},
		{"not a database", []string{"--sqlite-path", writeFile(t, dir, "notes.txt", "hello")}, 1, "is not an SQLite database"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(sidecarBin, append([]string{"--http-address", "127.0.0.1:0"}, c.args...)...)
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != c.code || !strings.Contains(string(out), c.mention) {
				t.Fatalf("exit %d, output %q; want %d mentioning %q", code, out, c.code, c.mention)
			}
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
