package sqlite

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// appDatabase makes an application's own database at path, in SQLite's
// default rollback-journal mode, with the tables named.
func appDatabase(t *testing.T, path string, tables ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	for _, name := range tables {
		if _, err := db.Exec("CREATE TABLE " + name + " (id INTEGER PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
	}
}

func journalMode(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode
}

// TestRefusesAnotherApplicationsDatabase: a file that holds tables of
// others is refused, unchanged (no tables added, still in its journal
// mode), with an error that names the file, the tables found and what
// the backend would change; with Options.SharedFile it is used.
func TestRefusesAnotherApplicationsDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	appDatabase(t, path, "orders", "customers", "invoices", "payments", "refunds", "shipments", "stock")
	b, err := Open(ctxT(t), Options{Path: path, Election: "e"})
	if err == nil {
		_ = b.Close()
		t.Fatal("Open of an application's database succeeded, want it refused")
	}
	wantErrContains(t, err, path, "customers", "invoices", "orders", "leader_records", "WAL", "SharedFile")
	if strings.Contains(err.Error(), "stock") {
		t.Errorf("the error lists every table (%v), want a few", err)
	}
	if mode := journalMode(t, path); mode != "delete" {
		t.Fatalf("the refused file is now in journal mode %q, want delete (untouched)", mode)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + suffix); err == nil {
			t.Fatalf("the refused file got a %s", suffix)
		}
	}

	shared := openWith(t, Options{Path: path, Election: "e", SharedFile: true})
	if _, _, err := shared.Get(ctxT(t)); err == nil {
		t.Fatal("Get on the shared file found a record, want none")
	}
	if mode := journalMode(t, path); mode != "wal" {
		t.Fatalf("the shared file is in journal mode %q, want wal", mode)
	}
}

// TestOwnFileIsNotForeign: a file holding only the backend's own tables,
// of any release, is opened without SharedFile.
func TestOwnFileIsNotForeign(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	conn := rawConn(t, path)
	for _, stmt := range []string{oldSchema, createVersions} { // as a release before hand-offs made it
		if _, err := conn.ExecContext(ctxT(t), stmt); err != nil {
			t.Fatal(err)
		}
	}
	openWith(t, Options{Path: path, Election: "e"})
	openWith(t, Options{Path: path, Election: "e"}) // its tables now include leader_deletes_refused
}

func openWith(t *testing.T, opts Options) *Backend {
	t.Helper()
	b, err := Open(ctxT(t), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
