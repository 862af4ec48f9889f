package fencesuite_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence/fencetest"
)

// oldTable creates the guard's table as versions without holders did, with
// the rows given, and returns the guard.
func oldTable(t *testing.T, db *sql.DB, name string, rows map[string]int64) *fence.SQLGuard {
	t.Helper()
	g, err := fence.NewSQLGuard(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+name+
		" (resource TEXT PRIMARY KEY, token BIGINT NOT NULL CHECK (token >= 0))"); err != nil {
		t.Fatal(err)
	}
	for resource, token := range rows {
		if _, err := db.ExecContext(t.Context(), "INSERT INTO "+name+" (resource, token) VALUES ($1, $2)", resource, token); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// EnsureTable adds the holder column to a table of an earlier version,
// through a database handle or inside a transaction, and keeps its tokens.
// A kept row has no holder yet: the first holder to present its token binds
// it, and from then on the holder rule applies.
func TestSQLGuardEnsureTableMigratesATableWithoutHolders(t *testing.T) {
	ensures := map[string]func(ctx context.Context, g *fence.SQLGuard, db *sql.DB) error{
		"through the database": func(ctx context.Context, g *fence.SQLGuard, db *sql.DB) error {
			return g.EnsureTable(ctx, db)
		},
		"in a transaction": func(ctx context.Context, g *fence.SQLGuard, db *sql.DB) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if err := g.EnsureTable(ctx, tx); err != nil {
				return err
			}
			return tx.Commit()
		},
	}
	forEachDatabase(t, func(t *testing.T, d database) {
		for how, ensure := range ensures {
			t.Run(how, func(t *testing.T) {
				f := newFixture(t, d) // for its application table and helpers
				f.guard = oldTable(t, f.db, f.guard.Table()+"_old", map[string]int64{"billing": 7, "reports": 3})
				for range 2 { // the second finds the column in place
					if err := ensure(t.Context(), f.guard, f.db); err != nil {
						t.Fatalf("EnsureTable on a table without holders: %v", err)
					}
				}
				if _, term := f.state(t, "billing"); term != (fence.TermID{Token: 7}) {
					t.Fatalf("after the migration: %v, want token 7 with no holder", term)
				}
				a, b := fence.TermID{Token: 7, Holder: "app-7_1"}, fence.TermID{Token: 7, Holder: "app-7_2"}
				steps := []struct {
					term fence.TermID
					want error
				}{
					{fencetest.Term(6), fence.ErrStaleToken},
					{a, nil}, // binds token 7 to a
					{a, nil},
					{b, fence.ErrTokenReused},
					{fencetest.Term(8), nil},
				}
				for _, s := range steps {
					checkGuardAnswer(t, f.write(t.Context(), "billing", s.term, "v"), s.term, s.want)
				}
				if _, term := f.state(t, "reports"); term != (fence.TermID{Token: 3}) {
					t.Fatalf("an untouched row: %v, want token 3 with no holder", term)
				}
			})
		}
	})
}

// Replicas starting together may migrate the same old table at once; each
// EnsureTable succeeds.
func TestSQLGuardEnsureTableMigratesConcurrently(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		f := newFixture(t, d)
		g := oldTable(t, f.db, f.guard.Table()+"_old", nil)
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { errs[i] = g.EnsureTable(t.Context(), f.db) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent migrations: %v", err)
		}
		f.guard = g
		f.mustWrite(t, "billing", fencetest.Term(1), "after the migration")
	})
}
