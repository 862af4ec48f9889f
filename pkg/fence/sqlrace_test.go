package fence_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// Two leaders, an old one with token t and a new one with t+1, write the
// same resource in concurrent transactions. Whichever checks first holds
// the guard's lock until it commits; the other waits. Either way the final
// state is the new leader's write, and the old leader's is rejected when its
// check comes after the new leader's.
func TestSQLGuardConcurrentTransactions(t *testing.T) {
	const old, young = int64(4), int64(5)
	cases := []struct {
		name        string
		first       int64 // checks first and holds the lock
		second      int64 // checks while the first is open, and waits
		seeded      bool  // the resource already has a token (3)
		secondStale bool
	}{
		{name: "older first", first: old, second: young, seeded: true},
		{name: "newer first", first: young, second: old, seeded: true, secondStale: true},
		{name: "older first on a new resource", first: old, second: young},
		{name: "newer first on a new resource", first: young, second: old, secondStale: true},
	}
	forEachDatabase(t, func(t *testing.T, d database) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				f := newFixture(t, d)
				ctx := t.Context()
				if c.seeded {
					f.mustWrite(t, "billing", 3, "before")
				}
				value := func(token int64) string { return fmt.Sprintf("written with %d", token) }

				tx, err := f.db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				if err := f.guard.Check(ctx, tx, "billing", c.first); err != nil {
					t.Fatalf("first check (token %d): %v", c.first, err)
				}
				second := make(chan error, 1)
				go func() { second <- f.write(ctx, "billing", c.second, value(c.second)) }()
				d.waitBlocked(t, f.db)
				select {
				case err := <-second:
					t.Fatalf("the second write (token %d) finished while the first transaction held the lock: %v", c.second, err)
				default:
				}
				if err := f.put(ctx, tx, "billing", value(c.first)); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatalf("first commit: %v", err)
				}

				err = <-second
				if c.secondStale != errors.Is(err, fence.ErrStaleToken) || (!c.secondStale && err != nil) {
					t.Fatalf("second write (token %d): %v, want stale: %v", c.second, err, c.secondStale)
				}
				if got, token := f.state(t, "billing"); got != value(young) || token != young {
					t.Fatalf("final value %q token %d, want %q %d", got, token, value(young), young)
				}
			})
		}
	})
}
