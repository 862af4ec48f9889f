package fencesuite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// Replica A (token 1) was paused and woke up after B (token 2) took over and
// wrote. A's write is checked in its own transaction and refused. C was
// handed token 2 again by a store that was reset: refused too, since token 2
// is B's here.
func TestSQLGuardWalkthrough(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "app.db")+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	guard, err := fence.NewSQLGuard("") // table fence_tokens
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.EnsureTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE reports (name TEXT PRIMARY KEY, value TEXT)`); err != nil {
		t.Fatal(err)
	}

	write := func(term fence.TermID, value string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		if err := guard.Check(ctx, tx, "daily-report", term); err != nil {
			return err // fence.ErrStaleToken: a newer leader has written
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO reports (name, value) VALUES ('daily', $1)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, value)
		if err != nil {
			return err
		}
		return tx.Commit()
	}

	if err := write(fence.TermID{Token: 2, Holder: "B"}, "B's fresh value"); err != nil {
		t.Fatalf("B, token 2: %v", err)
	}
	if err := write(fence.TermID{Token: 1, Holder: "A"}, "A's stale value"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("A, token 1: %v, want ErrStaleToken", err)
	}
	if err := write(fence.TermID{Token: 2, Holder: "C"}, "C's value"); !errors.Is(err, fence.ErrTokenReused) {
		t.Fatalf("C, token 2 again: %v, want ErrTokenReused", err)
	}

	var value string
	if err := db.QueryRow(`SELECT value FROM reports WHERE name = 'daily'`).Scan(&value); err != nil {
		t.Fatal(err)
	}
	if value != "B's fresh value" {
		t.Fatalf("report %q, want B's", value)
	}
}
