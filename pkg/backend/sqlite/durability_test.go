package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// TestOnlyAReleaseCommitsWithoutWaitingForTheDisk: every write that names
// a holder (create, acquire, renew) commits with synchronous=FULL, a
// release (no holder) with NORMAL, and every connection the pool hands out
// afterwards is back at FULL.
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

	// Hold both connections of the pool at once, so each is checked.
	for i := range writerConns {
		conn, err := b.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var level int
		if err := conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&level); err != nil || level != full {
			t.Fatalf("pool connection %d: synchronous = %d (%v), want %d", i, level, err, full)
		}
	}
}
