package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(helperMain())
	}
	slog.SetDefault(slog.New(slog.DiscardHandler)) // what backends log on a loss; tests that read it pass a Logger
	goleak.VerifyTestMain(m)
}

// openT opens a Backend on path for election and closes it at cleanup.
func openT(t testing.TB, path, election string) *Backend {
	t.Helper()
	b, err := Open(context.Background(), Options{Path: path, Election: election})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestConformance runs the shared suite on one file per Run; every handle is
// a separate Backend, with its own connections for reads and writes, as a
// separate process would have (the watch of the file they share, as the
// handles of one process do).
func TestConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	backendtest.Run(t, func(t *testing.T, name string) backend.Backend {
		return openT(t, path, name)
	})
}

func TestDescribe(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	b := openT(t, "rel.db", "billing")
	want := "sqlite:" + filepath.Join(dir, "rel.db") + "#billing"
	if got := b.Describe(); got != want {
		t.Fatalf("Describe() = %q, want %q", got, want)
	}
	if w := b.Warnings(); len(w) != 0 {
		t.Fatalf("Warnings() on a local disk = %q, want none", w)
	}
}

// TestPathNeedsEscaping opens a file whose name holds the characters a
// file: URI gives meaning to.
func TestPathNeedsEscaping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a?b#c%20d.db")
	b := openT(t, path, "x")
	if _, err := b.Create(ctxT(t), backendtest.SampleRecord("a", 1)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at the path given: %v", err)
	}
}

// TestVersionsNeverRepeat checks versions across elections in one file, and
// for a record deleted behind the backend's back (the trigger that refuses
// it dropped first) and created again.
func TestVersionsNeverRepeat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	a, b := openT(t, path, "a"), openT(t, path, "b")
	seen := map[backend.Version]string{}
	record := func(who string, v backend.Version) {
		t.Helper()
		if prev, dup := seen[v]; dup {
			t.Fatalf("version %q issued to %s and again to %s", v, prev, who)
		}
		seen[v] = who
	}
	va, err := a.Create(ctxT(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create a: %v", err)
	}
	record("create a", va)
	vb, err := b.Create(ctxT(t), backendtest.SampleRecord("b", 1))
	if err != nil {
		t.Fatalf("Create b: %v", err)
	}
	record("create b", vb)
	for i := range 3 {
		if va, err = a.Update(ctxT(t), va, backendtest.SampleRecord("a", int64(i+2))); err != nil {
			t.Fatalf("Update a: %v", err)
		}
		record("update a", va)
	}

	for _, stmt := range []string{"DROP TRIGGER leader_records_kept_on_delete", "DELETE FROM leader_records WHERE name = 'a'"} {
		if _, err := a.db.ExecContext(ctxT(t), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if va, err = a.Create(ctxT(t), backendtest.SampleRecord("a", 9)); err != nil {
		t.Fatalf("Create after delete: %v", err)
	}
	record("re-create a", va)
}

// TestSwitchesToWAL: a database created in SQLite's default rollback-journal
// mode is in WAL mode once opened, for every connection to it.
func TestSwitchesToWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	plain, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = plain.Close() }()
	journalMode := func() string {
		var mode string
		// A read first: a connection learns of another's switch to WAL on its
		// next read, not when asked for its journal mode.
		if _, err := plain.ExecContext(ctxT(t), "SELECT count(*) FROM sqlite_schema"); err != nil {
			t.Fatalf("read: %v", err)
		}
		if err := plain.QueryRowContext(ctxT(t), "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatalf("journal_mode: %v", err)
		}
		return mode
	}
	if _, err := plain.ExecContext(ctxT(t), "PRAGMA user_version = 1"); err != nil {
		t.Fatal(err)
	}
	if mode := journalMode(); mode != "delete" {
		t.Fatalf("a new database is in journal mode %q, want delete to start from", mode)
	}
	openT(t, path, "e")
	if mode := journalMode(); mode != "wal" {
		t.Fatalf("after Open the database is in journal mode %q, want wal", mode)
	}
}

func TestTimesRoundTrip(t *testing.T) {
	b := openT(t, filepath.Join(t.TempDir(), "leader.db"), "times")
	ist := time.FixedZone("IST", 5*3600+1800)
	tests := []struct {
		name string
		in   time.Time
		want time.Time
	}{
		{"zero", time.Time{}, time.Time{}},
		{"nanoseconds truncated", time.Date(2026, 1, 2, 3, 4, 5, 123456789, ist), time.Date(2026, 1, 1, 21, 34, 5, 123456000, time.UTC)},
		{"epoch is not zero", time.Unix(0, 0), time.Unix(0, 0).UTC()},
		{"before 1970 rounds down", time.Unix(-1, 999999999), time.Unix(-1, 999999000).UTC()},
	}
	var version backend.Version
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := backend.Record{HolderIdentity: "h", LeaseDurationSeconds: 1, AcquireTime: tt.in, RenewTime: tt.in}
			var err error
			if version == "" {
				version, err = b.Create(ctxT(t), rec)
			} else {
				version, err = b.Update(ctxT(t), version, rec)
			}
			if err != nil {
				t.Fatalf("write: %v", err)
			}
			got, _, err := b.Get(ctxT(t))
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			for field, g := range map[string]time.Time{"AcquireTime": got.AcquireTime, "RenewTime": got.RenewTime} {
				if g != tt.want { // == also compares the location: UTC, or zero
					t.Errorf("%s = %v (%v), want %v", field, g, g.Location(), tt.want)
				}
			}
		})
	}
}

func TestTimeOutOfRange(t *testing.T) {
	b := openT(t, filepath.Join(t.TempDir(), "leader.db"), "far")
	rec := backendtest.SampleRecord("a", 1)
	rec.RenewTime = time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := b.Create(ctxT(t), rec)
	if err == nil {
		t.Fatal("Create with a renew time in the year 300000 succeeded")
	}
	if _, _, err := b.Get(ctxT(t)); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("after the failed Create, Get = %v, want ErrNotFound", err)
	}
}
