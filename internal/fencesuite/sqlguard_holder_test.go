package fencesuite_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence/fencetest"
)

// The SQL guard answers the same steps as the memory guard: an equal token
// passes only from the holder that wrote with it first.
func TestSQLGuardHolderRule(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		f := newFixture(t, d)
		var last fence.TermID
		for _, s := range fencetest.GuardSteps() {
			t.Run(s.Name, func(t *testing.T) {
				err := f.write(t.Context(), "billing", s.Term, fmt.Sprint("written by ", s.Term))
				checkGuardAnswer(t, err, s.Term, s.Want)
				if s.Want == nil {
					last = s.Term
				}
				if value, accepted := f.state(t, "billing"); value != fmt.Sprint("written by ", last) || accepted != last {
					t.Fatalf("value %q, accepted %v; want the write of %v", value, accepted, last)
				}
			})
		}
	})
}

// Many holders handed the same token (a store reset) write one resource at
// once: exactly one write lands, and every other is refused as a reuse.
func TestSQLGuardOneTokenManyHolders(t *testing.T) {
	const writers = 6
	cases := []struct {
		name   string
		seeded bool // the resource already has token 4
	}{
		{"new resource", false},
		{"resource at a lower token", true},
	}
	forEachDatabase(t, func(t *testing.T, d database) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				f := newFixture(t, d)
				if c.seeded {
					f.mustWrite(t, "billing", fencetest.Term(4), "before")
				}
				errs := make([]error, writers)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range writers {
					term := fence.TermID{Token: 5, Holder: fmt.Sprintf("app-%d_1", i)}
					wg.Go(func() {
						<-start
						errs[i] = f.write(t.Context(), "billing", term, fmt.Sprint("written by ", term))
					})
				}
				close(start)
				wg.Wait()
				winner := soleWriter(t, errs)
				want := fence.TermID{Token: 5, Holder: fmt.Sprintf("app-%d_1", winner)}
				if value, accepted := f.state(t, "billing"); value != fmt.Sprint("written by ", want) || accepted != want {
					t.Fatalf("value %q, accepted %v; want the write of %v", value, accepted, want)
				}
			})
		}
	})
}
