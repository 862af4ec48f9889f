package sqlite

import (
	"context"
	"database/sql"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// TestOnlyAReleaseCommitsWithoutWaitingForTheDisk: every write that names
// a holder (create, renew, acquire) commits with synchronous=FULL, a
// release (no holder) with NORMAL.
func TestOnlyAReleaseCommitsWithoutWaitingForTheDisk(t *testing.T) {
	b := openT(t, filepath.Join(t.TempDir(), "leader.db"), "e")
	var levels []int
	beforeCommit = func(tx *sql.Tx) {
		var level int
		if err := tx.QueryRow("PRAGMA synchronous").Scan(&level); err != nil {
			t.Errorf("PRAGMA synchronous: %v", err)
		}
		levels = append(levels, level)
	}
	t.Cleanup(func() { beforeCommit = nil })

	ctx := context.Background()
	v, err := b.Create(ctx, backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	released := backendtest.SampleRecord("", 1)
	released.LeaseDurationSeconds = 1
	for i, rec := range []backend.Record{backendtest.SampleRecord("a", 1), released, backendtest.SampleRecord("b", 2), released} {
		if v, err = b.Update(ctx, v, rec); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	const full, normal = 2, 1
	if want := []int{full, full, normal, full, normal}; !slices.Equal(levels, want) {
		t.Fatalf("synchronous at each commit (create, renew, release, acquire, release) = %v, want %v", levels, want)
	}
}

// TestAReleaseSurvivesTheCrashOfItsProcess: a helper process releases and
// is killed (SIGKILL) as soon as it reports the commit; a handle opened
// afterwards reads the release. A relaxed commit skips only the fsync: its
// pages are in the -wal before Commit returns.
func TestAReleaseSurvivesTheCrashOfItsProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	v, err := openT(t, path, "e").Create(ctxT(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	h := startHelpers(t, 1, path, "e")[0]
	if _, err := io.WriteString(h.stdin, "release "+string(v)+"\n"); err != nil {
		t.Fatal(err)
	}
	answer := h.next(t)
	_ = h.cmd.Process.Kill()
	won, released, ok := strings.Cut(answer, " ")
	if !ok || won != "won" {
		t.Fatalf("release: %q", answer)
	}

	rec, got, err := openT(t, path, "e").Get(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if got != backend.Version(released) || rec.HolderIdentity != "" {
		t.Fatalf("after the crash: version %s holder %q, want the release: version %s holder \"\"", got, rec.HolderIdentity, released)
	}
}

// TestTheReleaseConnectionIsOpenBeforeTheFirstRelease: Open opens the
// release handle's one connection, so a graceful hand-off does not wait
// for it to be opened.
func TestTheReleaseConnectionIsOpenBeforeTheFirstRelease(t *testing.T) {
	b := openT(t, filepath.Join(t.TempDir(), "leader.db"), "e")
	if st := b.releaseDB.Stats(); st.OpenConnections != 1 || st.Idle != 1 {
		t.Fatalf("release handle after Open: %d connections open, %d idle; want 1 and 1", st.OpenConnections, st.Idle)
	}
}

// TestWriterDSNCommitsAsTheBackendDoes: a connection opened with
// WriterDSN runs in WAL mode, begins IMMEDIATE (it takes the write lock at
// BEGIN) and syncs at FULL, or NORMAL for a release.
func TestWriterDSNCommitsAsTheBackendDoes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	const full, normal = 2, 1
	for _, c := range []struct {
		release bool
		level   int
	}{{false, full}, {true, normal}} {
		db, err := sql.Open("sqlite", WriterDSN(path, c.release))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		var mode string
		var level int
		if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Fatalf("release %v: journal_mode %q (%v), want wal", c.release, mode, err)
		}
		if err := db.QueryRow("PRAGMA synchronous").Scan(&level); err != nil || level != c.level {
			t.Fatalf("release %v: synchronous %d (%v), want %d", c.release, level, err, c.level)
		}
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		other, err := sql.Open("sqlite", dsn(path, time.Millisecond, writerPool))
		if err != nil {
			t.Fatal(err)
		}
		_, err = other.Exec("CREATE TABLE IF NOT EXISTS t (x)")
		_ = other.Close()
		_ = tx.Rollback()
		if err == nil {
			t.Fatalf("release %v: another writer wrote while a transaction was open: BEGIN did not take the write lock", c.release)
		}
	}
}
