package fencesuite_test

import (
	"fmt"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence/fencetest"
)

// Two terms write the same resource in concurrent transactions. Whichever
// checks first holds the guard's lock until it commits; the other waits,
// then is checked against what the first committed: an old leader (token t)
// against a new one (t+1), or two holders handed the same token.
func TestSQLGuardConcurrentTransactions(t *testing.T) {
	old, young := fencetest.Term(4), fencetest.Term(5)
	twin := fence.TermID{Token: 5, Holder: "app-5_2"} // token 5 again, another holder
	cases := []struct {
		name   string
		first  fence.TermID // checks first and holds the lock
		second fence.TermID // checks while the first is open, and waits
		seeded bool         // the resource already has a token (3)
		refuse error        // the second's answer; nil: accepted
		final  fence.TermID // the term whose write the resource keeps
	}{
		{name: "older first", first: old, second: young, seeded: true, final: young},
		{name: "newer first", first: young, second: old, seeded: true, refuse: fence.ErrStaleToken, final: young},
		{name: "older first on a new resource", first: old, second: young, final: young},
		{name: "newer first on a new resource", first: young, second: old, refuse: fence.ErrStaleToken, final: young},
		{name: "same token, other holder", first: young, second: twin, seeded: true, refuse: fence.ErrTokenReused, final: young},
		{name: "same token, other holder, on a new resource", first: twin, second: young, refuse: fence.ErrTokenReused, final: twin},
		{name: "same term twice", first: young, second: young, seeded: true, final: young},
	}
	forEachDatabase(t, func(t *testing.T, d database) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				f := newFixture(t, d)
				ctx := t.Context()
				if c.seeded {
					f.mustWrite(t, "billing", fencetest.Term(3), "before")
				}
				value := func(term fence.TermID) string { return fmt.Sprint("written with ", term) }

				tx, err := f.db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				if err := f.guard.Check(ctx, tx, "billing", c.first); err != nil {
					t.Fatalf("first check (%v): %v", c.first, err)
				}
				second := make(chan error, 1)
				go func() { second <- f.write(ctx, "billing", c.second, value(c.second)) }()
				d.waitBlocked(t, f.db)
				select {
				case err := <-second:
					t.Fatalf("the second write (%v) finished while the first transaction held the lock: %v", c.second, err)
				default:
				}
				if err := f.put(ctx, tx, "billing", value(c.first)); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatalf("first commit: %v", err)
				}

				err = <-second
				checkGuardAnswer(t, err, c.second, c.refuse)
				if got, term := f.state(t, "billing"); got != value(c.final) || term != c.final {
					t.Fatalf("final value %q, %v; want %q, %v", got, term, value(c.final), c.final)
				}
			})
		}
	})
}
