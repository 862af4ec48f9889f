package election

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

// flaky fails every store call while down is set.
type flaky struct {
	backend.Backend
	down atomic.Bool
}

var errUnreachable = errors.New("store unreachable")

func (f *flaky) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	if f.down.Load() {
		return backend.Record{}, "", errUnreachable
	}
	return f.Backend.Get(ctx)
}

func (f *flaky) Create(ctx context.Context, r backend.Record) (backend.Version, error) {
	if f.down.Load() {
		return "", errUnreachable
	}
	return f.Backend.Create(ctx, r)
}

func (f *flaky) CreateFirst(ctx context.Context, r backend.Record) (backend.Version, error) {
	if f.down.Load() {
		return "", errUnreachable
	}
	return f.Backend.(backend.FirstCreator).CreateFirst(ctx, r)
}

func (f *flaky) Update(ctx context.Context, v backend.Version, r backend.Record) (backend.Version, error) {
	if f.down.Load() {
		return "", errUnreachable
	}
	return f.Backend.Update(ctx, v, r)
}

func TestLoopStepsDownWhenCutOffAndContendsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		cut := &flaky{Backend: store.Open("loop")}
		a := start(t, cut, "a", true)
		time.Sleep(time.Second)
		b := start(t, store.Open("loop"), "b", true)
		time.Sleep(10 * time.Second)
		if soleLeader(t, a, b) != a {
			t.Fatal("a should lead: it started first")
		}

		cut.down.Store(true)
		validUntil := a.Status().ValidUntil
		time.Sleep(time.Until(validUntil) - time.Nanosecond)
		if !a.Status().Leader {
			t.Fatal("a stopped claiming before its renew deadline")
		}
		time.Sleep(time.Nanosecond)
		if a.Status().Leader {
			t.Fatal("a still claims leadership at its renew deadline")
		}
		time.Sleep(DefaultLeaseDuration)
		if soleLeader(t, a, b) != b || b.Status().Token != 2 {
			t.Fatalf("b should have taken over with token 2, has %+v", b.Status())
		}

		cut.down.Store(false)
		time.Sleep(time.Minute)
		if soleLeader(t, a, b) != b {
			t.Fatal("a took leadership back from a live leader")
		}
		b.stop()
		synctest.Wait()
		if soleLeader(t, a, b) != a || a.Status().Token != 3 {
			t.Fatalf("a should contend again and lead with token 3, has %+v", a.Status())
		}
	})
}

// hanging blocks every Get until released, ignoring its context: a wedged
// store client.
type hanging struct {
	*memory.Backend // keeps CreateFirst: a first start leads at once
	release         chan struct{}
}

func (h *hanging) Get(context.Context) (backend.Record, backend.Version, error) {
	<-h.release
	return backend.Record{}, "", errUnreachable
}

func TestHealthyReportsAWedgedLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hanging{Backend: memory.NewStore().Open("loop"), release: make(chan struct{})}
		e := start(t, h, "a", false)
		limit := DefaultRenewDeadline + 2*time.Duration(JitterFactor*float64(DefaultRetryPeriod))
		time.Sleep(limit - time.Nanosecond)
		if !e.Healthy() {
			t.Fatal("unhealthy before the wedge limit")
		}
		time.Sleep(time.Nanosecond)
		if e.Healthy() {
			t.Fatal("healthy although the loop has not finished an attempt for the whole limit")
		}
		close(h.release)
		synctest.Wait()
		if !e.Healthy() {
			t.Fatal("still unhealthy after the store call returned")
		}
	})
}

// slowUpdates makes the next n Updates wait delay before they are written,
// as a store whose write lock another process holds.
type slowUpdates struct {
	*memory.Backend // keeps CreateFirst: a first start leads at once
	n               atomic.Int32
	delay           time.Duration
}

func (s *slowUpdates) Update(ctx context.Context, v backend.Version, r backend.Record) (backend.Version, error) {
	if s.n.Add(-1) >= 0 {
		time.Sleep(s.delay)
	}
	return s.Backend.Update(ctx, v, r)
}

func TestLeaderRenewsAtOnceAfterASlowRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &slowUpdates{Backend: memory.NewStore().Open("loop"), delay: DefaultRenewDeadline - 100*time.Millisecond}
		a := start(t, b, "a", true)
		time.Sleep(time.Second)
		// The first slow renewal outlives the claim and fails; the next
		// attempt (no longer leading, so allowed the whole renew deadline)
		// waits nearly as long and succeeds, leaving a claim of ~100ms.
		b.n.Store(2)
		// While the slow write is in flight the old claim lapses: that is
		// the rule. Once the write lands, the claim it gives is short; the
		// leader must renew at once instead of letting it lapse again.
		waitFor := func(leader bool) {
			for a.Status().Leader != leader {
				time.Sleep(10 * time.Millisecond)
			}
		}
		waitFor(false)
		waitFor(true)
		for i := range 300 {
			time.Sleep(10 * time.Millisecond)
			if !a.Status().Leader {
				t.Fatalf("the claim lapsed again %v after the slow renewal landed", time.Duration(i+1)*10*time.Millisecond)
			}
		}
	})
}

// hangingUpdates makes the next n Updates hang until their context ends,
// as a request to a store that never answers.
type hangingUpdates struct {
	*memory.Backend // keeps CreateFirst: a first start leads at once
	n               atomic.Int32
	started         chan time.Time
}

func (h *hangingUpdates) Update(ctx context.Context, v backend.Version, r backend.Record) (backend.Version, error) {
	if h.n.Add(-1) >= 0 {
		h.started <- time.Now()
		<-ctx.Done()
		return "", ctx.Err()
	}
	return h.Backend.Update(ctx, v, r)
}

// A leader's attempt is cut off when half a retry period of its claim is
// left (half of what is left, if less), and a request cut off by that
// bound is retried at once: at the defaults a renewal at +5s that hangs
// is cut off at +9s, the retry at +9.5s, and the third try, at +9.5s,
// still falls inside the claim (the package doc's schedule).
func TestLeaderRetriesBeforeItsClaimEndsAfterRenewalsHang(t *testing.T) {
	for _, hung := range []int32{1, 2} {
		t.Run(fmt.Sprintf("%d hung", hung), func(t *testing.T) { testRenewalsHang(t, hung) })
	}
}

func testRenewalsHang(t *testing.T, hung int32) {
	synctest.Test(t, func(t *testing.T) {
		h := &hangingUpdates{Backend: memory.NewStore().Open("loop"), started: make(chan time.Time, hung)}
		a := start(t, h, "a", true)
		time.Sleep(time.Second)
		if !a.Status().Leader {
			t.Fatal("a does not lead a free record")
		}
		claimedUntil := a.Status().ValidUntil
		claimFrom := claimedUntil.Add(-DefaultRenewDeadline)
		h.n.Store(hung) // the next renewals never get an answer
		renewal := <-h.started
		tries := []time.Duration{renewal.Sub(claimFrom)}
		for range hung - 1 {
			tries = append(tries, (<-h.started).Sub(claimFrom))
		}
		want := []time.Duration{5 * time.Second, 9 * time.Second, 9500 * time.Millisecond}[:hung]
		if !slices.Equal(tries, want) {
			t.Fatalf("hung tries started at %v after the claim began, want %v", tries, want)
		}
		for time.Now().Before(claimedUntil.Add(DefaultRenewDeadline)) {
			time.Sleep(10 * time.Millisecond)
			if !a.Status().Leader {
				t.Fatalf("a stopped claiming %v after its renewal hung: no try fitted before its claim ended",
					time.Since(renewal))
			}
		}
		if got := a.Status().Token; got != 1 {
			t.Fatalf("token %d, want 1: a kept its term", got)
		}
	})
}

// A leader whose record is deleted recreates it at the change signal, not
// at its next renewal, and keeps leading with the next token.
func TestLeaderRecreatesItsDeletedRecordAtTheSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		a := start(t, store.Open("loop"), "a", false)
		time.Sleep(time.Second)
		store.Delete("loop")
		synctest.Wait()
		rec, _, err := store.Open("loop").Get(t.Context())
		if err != nil || rec.HolderIdentity != "a" || rec.Transitions != 2 {
			t.Fatalf("right after the deletion: %+v, %v; want a's record with token 2", rec, err)
		}
		if s := a.Status(); !s.Leader || s.Token != 2 {
			t.Fatalf("a: %+v, want leading with token 2", s)
		}
	})
}

// A candidate that starts while the record is deleted, at any offset
// around the deletion, never leads beside the holder of the deleted
// record: not while that holder's requests succeed, nor while they fail
// (it then claims on until its renew deadline), nor while its change
// signals are lost. Every candidate is sampled every 10ms.
func TestNewcomerAfterADeletionNeverLeadsBesideTheLastHolder(t *testing.T) {
	type fault int
	const (
		none fault = iota
		holderCutOff
		holderDeaf
	)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range []fault{none, holderCutOff, holderDeaf} {
		for round := range 40 {
			synctest.Test(t, func(t *testing.T) {
				store := memory.NewStore()
				var hb backend.Backend = store.Open("loop")
				cut := &flaky{Backend: hb}
				hb = cut
				if f == holderDeaf {
					hb = deaf{hb}
				}
				a := start(t, hb, "a", false)
				time.Sleep(time.Second + time.Duration(rng.Int64N(int64(5*time.Second))))
				if f == holderCutOff {
					cut.down.Store(true)
				}
				store.Delete("loop")
				time.Sleep(time.Duration(rng.Int64N(int64(50 * time.Millisecond))))
				c := start(t, store.Open("loop"), "c", false)
				var both, cLed int
				for range 4000 { // 40s
					time.Sleep(10 * time.Millisecond)
					as, cs := a.Status(), c.Status()
					if as.Leader && cs.Leader {
						both++
					}
					if cs.Leader {
						cLed++
					}
				}
				if both != 0 {
					t.Fatalf("fault %d, round %d: a and c both led at %d of 4000 samples", f, round, both)
				}
				if f == holderCutOff && cLed == 0 {
					t.Fatalf("fault %d, round %d: c never led while a was cut off", f, round)
				}
			})
		}
	}
}

// deaf never signals a change: a watch that lost its events.
type deaf struct{ backend.Backend }

func (deaf) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ch) })
	return ch
}

// slowStore answers every request correctly after latency, unless the
// request's context ends first: then it does not land.
type slowStore struct {
	*memory.Backend
	latency time.Duration
}

func (s *slowStore) wait(ctx context.Context) error {
	select {
	case <-time.After(s.latency):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slowStore) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	if err := s.wait(ctx); err != nil {
		return backend.Record{}, "", err
	}
	return s.Backend.Get(ctx)
}

func (s *slowStore) Create(ctx context.Context, r backend.Record) (backend.Version, error) {
	if err := s.wait(ctx); err != nil {
		return "", err
	}
	return s.Backend.Create(ctx, r)
}

func (s *slowStore) CreateFirst(ctx context.Context, r backend.Record) (backend.Version, error) {
	if err := s.wait(ctx); err != nil {
		return "", err
	}
	return s.Backend.CreateFirst(ctx, r)
}

func (s *slowStore) Update(ctx context.Context, v backend.Version, r backend.Record) (backend.Version, error) {
	if err := s.wait(ctx); err != nil {
		return "", err
	}
	return s.Backend.Update(ctx, v, r)
}

// A store that answers every request slowly but within the claim keeps
// its leader: at the defaults, up to 4s a request (the package doc), the
// leader renews every time and, after its first term, the election is
// never leaderless, nor has it two leaders.
func TestLeaderOnASlowStoreKeepsRenewing(t *testing.T) {
	for _, latency := range []time.Duration{2 * time.Second, 2600 * time.Millisecond, 3 * time.Second, 3900 * time.Millisecond} {
		t.Run(latency.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memory.NewStore()
				a := start(t, &slowStore{Backend: store.Open("loop"), latency: latency}, "a", true)
				b := start(t, &slowStore{Backend: store.Open("loop"), latency: latency}, "b", true)
				// The first term starts late in its claim (a read and a
				// create took 2 latencies); from the next one on, the
				// leader's renewals fit.
				time.Sleep(time.Minute)
				var leaderless, two int
				for range 3000 { // 5 minutes
					time.Sleep(100 * time.Millisecond)
					switch len(leaders(a, b)) {
					case 0:
						leaderless++
					case 2:
						two++
					}
				}
				if leaderless != 0 || two != 0 {
					t.Fatalf("of 3000 samples %d had no leader and %d two, want 0 and 0", leaderless, two)
				}
			})
		})
	}
}
