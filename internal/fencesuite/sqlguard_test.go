package fencesuite_test

import (
	"errors"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence/fencetest"
)

func TestSQLGuardAcceptsFirstHigherAndEqualTokens(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		f := newFixture(t, d)
		steps := []struct {
			name  string
			token int64
			value string
		}{
			{"first write", 3, "first"},
			{"higher token", 5, "higher"},
			{"equal token", 5, "same term again"},
		}
		for _, s := range steps {
			if err := f.write(t.Context(), "billing", fencetest.Term(s.token), s.value); err != nil {
				t.Fatalf("%s (token %d): %v", s.name, s.token, err)
			}
			if value, term := f.state(t, "billing"); value != s.value || term != fencetest.Term(s.token) {
				t.Fatalf("after %s: value %q, %v; want %q, %v", s.name, value, term, s.value, fencetest.Term(s.token))
			}
		}
	})
}

func TestSQLGuardRejectsLowerTokenAndCallerRollsBack(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		f := newFixture(t, d)
		f.mustWrite(t, "billing", fencetest.Term(7), "new leader")

		// The stale leader writes first and checks after, in one
		// transaction: the check fails, so the write is rolled back.
		ctx := t.Context()
		tx, err := f.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.put(ctx, tx, "billing", "stale leader"); err != nil {
			t.Fatal(err)
		}
		err = f.guard.Check(ctx, tx, "billing", fencetest.Term(6))
		if !errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("Check with token 6 after 7: %v, want ErrStaleToken", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if err := f.write(ctx, "billing", fencetest.Term(1), "older still"); !errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("write with token 1 after 7: %v, want ErrStaleToken", err)
		}
		if value, term := f.state(t, "billing"); value != "new leader" || term != fencetest.Term(7) {
			t.Fatalf("value %q, %v; want %q, %v", value, term, "new leader", fencetest.Term(7))
		}
	})
}

func TestSQLGuardResourcesAreIndependent(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		f := newFixture(t, d)
		f.mustWrite(t, "billing", fencetest.Term(9), "billing at 9")
		f.mustWrite(t, "reports", fencetest.Term(2), "reports at 2")
		if err := f.write(t.Context(), "billing", fencetest.Term(2), "billing at 2"); !errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("billing at 2 after 9: %v, want ErrStaleToken", err)
		}
		for resource, want := range map[string]string{"billing": "billing at 9", "reports": "reports at 2"} {
			if value, _ := f.state(t, resource); value != want {
				t.Errorf("%s: %q, want %q", resource, value, want)
			}
		}
	})
}

func TestSQLGuardRejectsNegativeToken(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		f := newFixture(t, d)
		if err := f.write(t.Context(), "billing", fencetest.Term(-1), "negative"); !errors.Is(err, fence.ErrInvalidToken) {
			t.Fatalf("token -1: %v, want ErrInvalidToken", err)
		}
		if err := f.write(t.Context(), "billing", fencetest.Term(0), "zero"); err != nil {
			t.Fatalf("token 0: %v", err)
		}
		var rows int
		if err := f.db.QueryRow("SELECT count(*) FROM " + f.guard.Table()).Scan(&rows); err != nil || rows != 1 {
			t.Fatalf("%d rows (%v), want 1", rows, err)
		}
	})
}

func TestSQLGuardDefaultTableAndEnsureTableTwice(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		g, err := fence.NewSQLGuard("")
		if err != nil || g.Table() != fence.DefaultTable {
			t.Fatalf("NewSQLGuard(\"\") = %v, %v; want table %s", g, err, fence.DefaultTable)
		}
		db := d.open(t)
		for range 2 {
			if err := g.EnsureTable(t.Context(), db); err != nil {
				t.Fatal(err)
			}
		}
		tx, err := db.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := g.Check(t.Context(), tx, "billing", fencetest.Term(1)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestNewSQLGuardRejectsUnsafeTableNames(t *testing.T) {
	for _, name := range []string{"x; DROP TABLE y", "1tokens", "a.b.c", "tokens ", `"tokens"`, "to-kens", "."} {
		if _, err := fence.NewSQLGuard(name); err == nil {
			t.Errorf("NewSQLGuard(%q) succeeded", name)
		}
	}
	for _, name := range []string{"tokens", "public.fence_tokens", "_t9"} {
		if _, err := fence.NewSQLGuard(name); err != nil {
			t.Errorf("NewSQLGuard(%q): %v", name, err)
		}
	}
}

func TestSQLGuardCheckNeedsTransaction(t *testing.T) {
	g, _ := fence.NewSQLGuard("")
	if err := g.Check(t.Context(), nil, "billing", fencetest.Term(1)); err == nil {
		t.Fatal("Check with a nil transaction succeeded")
	}
}
