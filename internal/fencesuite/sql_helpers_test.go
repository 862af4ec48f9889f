package fencesuite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence/fencetest"
)

// database is one kind of database the SQL guard is tested on.
type database struct {
	name string
	open func(t *testing.T) *sql.DB
	// waitBlocked returns once another transaction waits for a lock, where
	// the database can tell; elsewhere it gives it a moment to get there.
	waitBlocked func(t *testing.T, db *sql.DB)
}

var databases = []database{
	{name: "sqlite", open: openSQLite, waitBlocked: func(*testing.T, *sql.DB) {
		time.Sleep(50 * time.Millisecond) // SQLite cannot tell; the outcome is the same either way
	}},
	{name: "postgres", open: openPostgres, waitBlocked: waitLockWaiter},
}

func openSQLite(t *testing.T) *sql.DB {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "app.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func waitLockWaiter(t *testing.T, db *sql.DB) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int
		err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("no transaction came to wait for the guard's lock within 10s")
}

// fixture is a guard and an application table on one database; each test
// gets tables of its own.
type fixture struct {
	db    *sql.DB
	guard *fence.SQLGuard
	data  string
}

var tables atomic.Int64

func newFixture(t *testing.T, d database) *fixture {
	t.Helper()
	n := tables.Add(1)
	f := &fixture{db: d.open(t), data: fmt.Sprintf("app_values_%d", n)}
	var err error
	if f.guard, err = fence.NewSQLGuard(fmt.Sprintf("fence_tokens_%d", n)); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := f.guard.EnsureTable(ctx, f.db); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.ExecContext(ctx, "CREATE TABLE "+f.data+" (resource TEXT PRIMARY KEY, value TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return f
}

// put is the application's write, in tx.
func (f *fixture) put(ctx context.Context, tx *sql.Tx, resource, value string) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO "+f.data+" (resource, value) VALUES ($1, $2)"+
		" ON CONFLICT (resource) DO UPDATE SET value = excluded.value", resource, value)
	return err
}

// write is a fenced write as an application makes it: check, write, commit.
func (f *fixture) write(ctx context.Context, resource string, term fence.TermID, value string) error {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f.guard.Check(ctx, tx, resource, term); err != nil {
		return err
	}
	if err := f.put(ctx, tx, resource, value); err != nil {
		return err
	}
	return tx.Commit()
}

// state returns the resource's value and the guard's term for it.
func (f *fixture) state(t *testing.T, resource string) (string, fence.TermID) {
	t.Helper()
	var value string
	var term fence.TermID
	if err := f.db.QueryRow("SELECT value FROM "+f.data+" WHERE resource = $1", resource).Scan(&value); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	if err := f.db.QueryRow("SELECT token, holder FROM "+f.guard.Table()+" WHERE resource = $1", resource).Scan(&term.Token, &term.Holder); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return value, term
}

func (f *fixture) mustWrite(t *testing.T, resource string, term fence.TermID, value string) {
	t.Helper()
	if err := f.write(t.Context(), resource, term, value); err != nil {
		t.Fatalf("write with %v: %v", term, err)
	}
}

func forEachDatabase(t *testing.T, test func(t *testing.T, d database)) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) { test(t, d) })
	}
}

// checkGuardAnswer fails unless err is what a guard must answer a write of
// term (see fencetest.CheckAnswer).
func checkGuardAnswer(t *testing.T, err error, term fence.TermID, want error) {
	t.Helper()
	if err := fencetest.CheckAnswer(err, term, want); err != nil {
		t.Fatal(err)
	}
}

// soleWriter is the index of the one writer whose write with token 5 was
// accepted, failing t unless exactly one was and every other was refused
// with ErrTokenReused.
func soleWriter(t *testing.T, errs []error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both wrote with token 5", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, fence.ErrTokenReused):
			t.Fatalf("writer %d: %v, want ErrTokenReused", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer wrote")
	}
	return winner
}
