package fencesuite_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence/fencetest"
)

// The guards docs/fencing.md documents (SQLite, PostgreSQL, MariaDB,
// Redis, etcd), each run as the page writes it on a real server, answer as
// any guard must.

// follows reports whether a write of term may follow accepted: a higher
// token, or the same term again.
func follows(term, accepted fence.TermID) bool {
	return term.Token > accepted.Token || term == accepted
}

func written(term fence.TermID) string { return fmt.Sprint("written by ", term) }

// Every step of fencetest.GuardSteps, in order, on one resource: the
// answer, and what the resource keeps after it.
func TestDocumentedGuardsAnswerGuardSteps(t *testing.T) {
	forEachGuardedStore(t, func(t *testing.T, s guardedStore) {
		g := s.open(t)
		var last fence.TermID
		for _, step := range fencetest.GuardSteps() {
			if step.Want == fence.ErrInvalidToken {
				continue // refused by the application before the store: the page's guards trust token >= 0 and a holder
			}
			t.Run(step.Name, func(t *testing.T) {
				err := g.write(t.Context(), "billing", step.Term, written(step.Term))
				checkGuardAnswer(t, err, step.Term, step.Want)
				if step.Want == nil {
					last = step.Term
				}
				if value, accepted := g.state(t, "billing"); value != written(last) || accepted != last {
					t.Fatalf("value %q, accepted %v; want the write of %v", value, accepted, last)
				}
			})
		}
	})
}

// The split brain: leader A (token 1) writes, is paused, B takes over
// (token 2) and writes; A wakes up and writes with the term it still
// holds. A's write is refused and B's stays; B writes on. Each writes over
// connections of its own; the resources of one guard are independent.
func TestDocumentedGuardsRefuseAPausedLeader(t *testing.T) {
	a, b := fence.TermID{Token: 1, Holder: "app-a_1"}, fence.TermID{Token: 2, Holder: "app-b_1"}
	forEachGuardedStore(t, func(t *testing.T, s guardedStore) {
		g := s.open(t)
		ctx := t.Context()
		if err := g.write(ctx, "report", a, "A before the pause"); err != nil {
			t.Fatalf("A before the pause: %v", err)
		}
		if err := g.write(ctx, "other", a, "A's other resource"); err != nil {
			t.Fatalf("A on another resource: %v", err)
		}
		paused, resumed := make(chan struct{}), make(chan error, 1)
		go func() {
			<-paused // A holds its term through the pause, as a frozen process does
			resumed <- g.write(ctx, "report", a, "A after the pause")
		}()
		if err := g.write(ctx, "report", b, "B's result"); err != nil {
			t.Fatalf("B, the new leader: %v", err)
		}
		close(paused)
		err := <-resumed
		checkGuardAnswer(t, err, a, fence.ErrStaleToken)
		if value, accepted := g.state(t, "report"); value != "B's result" || accepted != b {
			t.Fatalf("after A woke up: value %q, accepted %v; want B's result with %v", value, accepted, b)
		}
		if err := g.write(ctx, "report", b, "B's second result"); err != nil {
			t.Fatalf("B writing again: %v", err)
		}
		if value, _ := g.state(t, "report"); value != "B's second result" {
			t.Fatalf("value %q, want B's second result", value)
		}
		if value, accepted := g.state(t, "other"); value != "A's other resource" || accepted != a {
			t.Fatalf("the other resource: %q, %v; want A's write", value, accepted)
		}
	})
}

// Holders handed the same token (a store reset) write one resource at
// once, each over its own connection: exactly one write lands, every other
// is refused as a reuse.
func TestDocumentedGuardsOneTokenManyHolders(t *testing.T) {
	const writers = 6
	forEachGuardedStore(t, func(t *testing.T, s guardedStore) {
		for _, seeded := range []bool{false, true} {
			t.Run(fmt.Sprintf("seeded=%v", seeded), func(t *testing.T) {
				g := s.open(t)
				if seeded {
					if err := g.write(t.Context(), "billing", fencetest.Term(4), "before"); err != nil {
						t.Fatal(err)
					}
				}
				errs := make([]error, writers)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range writers {
					term := fence.TermID{Token: 5, Holder: fmt.Sprintf("app-%d_1", i)}
					wg.Go(func() {
						<-start
						errs[i] = g.write(t.Context(), "billing", term, written(term))
					})
				}
				close(start)
				wg.Wait()
				winner := soleWriter(t, errs)
				if r, ok := g.(interface{ retries() int64 }); ok && r.retries() > 0 {
					t.Logf("%d writes retried after a deadlock, as the page says", r.retries())
				}
				want := fence.TermID{Token: 5, Holder: fmt.Sprintf("app-%d_1", winner)}
				if value, accepted := g.state(t, "billing"); value != written(want) || accepted != want {
					t.Fatalf("value %q, accepted %v; want the write of %v", value, accepted, want)
				}
			})
		}
	})
}

// attempt is one write of the concurrent test: its term, when it was sent
// and answered, and the answer.
type attempt struct {
	term       fence.TermID
	start, end time.Time
	err        error
}

// Writers on connections of their own write one resource at once, with
// terms that move forward at different paces, each term twice, and one
// laggard keeps writing with token 1. Judged by real time: a term accepted
// after another had been accepted follows it (tokens never go back), and a
// refused write had a term it does not follow accepted before it was
// answered (no write that should have landed is refused). The resource
// keeps the write of the highest term accepted.
func TestDocumentedGuardsConcurrentWriters(t *testing.T) {
	const writers, terms = 4, 10
	forEachGuardedStore(t, func(t *testing.T, s guardedStore) {
		g := s.open(t)
		var mu sync.Mutex
		var log []attempt
		write := func(term fence.TermID) {
			a := attempt{term: term, start: time.Now()}
			a.err = g.write(t.Context(), "billing", term, written(term))
			a.end = time.Now()
			mu.Lock()
			log = append(log, a)
			mu.Unlock()
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range writers {
			wg.Go(func() {
				<-start
				for k := range terms {
					term := fencetest.Term(int64(k*writers + i + 1))
					write(term)
					write(term)
				}
			})
		}
		wg.Go(func() {
			<-start
			for range terms {
				write(fencetest.Term(1))
			}
		})
		close(start)
		wg.Wait()

		var accepted, refusedWrites []attempt
		for _, a := range log {
			switch {
			case a.err == nil:
				accepted = append(accepted, a)
			case errors.Is(a.err, fence.ErrStaleToken):
				refusedWrites = append(refusedWrites, a)
			default:
				t.Fatalf("%v: %v", a.term, a.err)
			}
		}
		if len(accepted) == 0 {
			t.Fatal("no write landed")
		}
		highest := accepted[0].term
		for _, a := range accepted {
			if a.term.Token > highest.Token {
				highest = a.term
			}
			for _, b := range accepted {
				if a.end.Before(b.start) && !follows(b.term, a.term) {
					t.Errorf("%v was accepted after %v had been: the accepted token went back", b.term, a.term)
				}
			}
		}
		for _, r := range refusedWrites {
			justified := false
			for _, a := range accepted {
				if a.start.Before(r.end) && !follows(r.term, a.term) {
					justified = true
					break
				}
			}
			if !justified {
				t.Errorf("%v was refused (%v), but no term it does not follow had been accepted", r.term, r.err)
			}
		}
		if value, term := g.state(t, "billing"); value != written(highest) || term != highest {
			t.Errorf("the resource keeps %q, %v; want the write of the highest accepted term, %v", value, term, highest)
		}
		t.Logf("%d writes landed, %d refused", len(accepted), len(refusedWrites))
		if r, ok := g.(interface{ retries() int64 }); ok && r.retries() > 0 {
			t.Logf("%d writes retried after a deadlock, as the page says", r.retries())
		}
	})
}

func TestFencingDocMariaDBTableRefusesNegativeTokens(t *testing.T) {
	db := mariadbDialect.open(t)
	table := fmt.Sprintf("fence_tokens_doc_%d", tables.Add(1))
	if _, err := db.ExecContext(t.Context(), ownTable(t, docBlock(t, "ddl", "mariadb", "sql"), table)); err != nil {
		t.Fatal(err)
	}
	check := ownTable(t, docBlock(t, "guard", "mariadb", "sql"), table)
	if _, err := db.ExecContext(t.Context(), check, "billing", -1, "app-1_1"); err == nil {
		t.Fatal("the documented table accepted token -1")
	}
}
