package process

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestSQLiteApplicationDatabaseRefused: --sqlite-path naming an
// application's own database (tables of others, rollback journal) makes
// the sidecar exit non-zero with a message naming the file, its tables and
// what it would change, and leaves the file as it was; with
// --sqlite-shared-file the sidecar elects on it.
func TestSQLiteApplicationDatabaseRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{"CREATE TABLE orders (id INTEGER PRIMARY KEY)", "INSERT INTO orders VALUES (1)"} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	_ = db.Close()

	refused := sidecartest.Launch(t, path)
	if code := refused.WaitExit(10 * time.Second); code == 0 {
		t.Fatal("the sidecar on an application's database exited 0, want non-zero")
	}
	logs := refused.Logs()
	for _, want := range []string{path, "orders", "leader_records", "WAL", "--sqlite-shared-file"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("the refusal does not mention %q:\n%s", want, logs)
		}
	}
	var mode string
	if err := mustQuery(t, path).QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "delete" {
		t.Fatalf("the refused file is in journal mode %q (%v), want delete: it was changed", mode, err)
	}

	shared := sidecartest.Start(t, path, "--sqlite-shared-file")
	if _, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{shared}, 10*time.Second); token != 1 {
		t.Fatalf("the sidecar on the shared file leads with token %d, want 1", token)
	}
	var orders int
	if err := mustQuery(t, path).QueryRow("SELECT count(*) FROM orders").Scan(&orders); err != nil || orders != 1 {
		t.Fatalf("the application's table holds %d rows (%v) after the sidecar shared it, want 1", orders, err)
	}
}

func mustQuery(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
