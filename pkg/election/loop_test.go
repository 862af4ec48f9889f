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

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

func TestLoopElectsOneLeaderAndHandsOffAtOnceOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		var all []*running
		for _, id := range []string{"a", "b", "c"} {
			all = append(all, start(t, store.Open("loop"), id, true))
		}
		time.Sleep(time.Minute)
		first := soleLeader(t, all...)
		token := first.Status().Token

		first.stop()
		synctest.Wait() // no virtual time passes: the hand-off rides the change signal
		second := soleLeader(t, all...)
		if got := second.Status().Token; got != token+1 {
			t.Fatalf("token after hand-off %d, want %d", got, token+1)
		}
		if first.Status().Leader {
			t.Fatal("the stopped candidate still claims leadership")
		}
	})
}

func TestLoopCrashFailoverWaitsOutTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		all := []*running{
			start(t, store.Open("loop"), "a", false),
			start(t, store.Open("loop"), "b", false),
		}
		// Half a retry period off the renewal schedule, so the renewal and
		// the reading of the status below never fall on one instant.
		time.Sleep(30*time.Second + DefaultRetryPeriod/2)
		old := soleLeader(t, all...)
		standby := others(all, old)[0]
		crashAndExpectTakeoverAtExpiry(t, old, standby)
	})
}

func TestLoopRenewsWithoutChangingTheToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		a := start(t, store.Open("loop"), "a", true)
		b := start(t, store.Open("loop"), "b", true)
		time.Sleep(time.Second)
		leader := soleLeader(t, a, b)
		token := leader.Status().Token
		for range 100 {
			time.Sleep(DefaultRetryPeriod)
			if s := leader.Status(); !s.Leader || s.Token != token {
				t.Fatalf("leader status changed to %+v during steady renewals", s)
			}
		}
	})
}

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
// still falls inside the claim (the schedule in docs/election.md).
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

// slowButSure answers every request correctly after latency, as a store
// that is slow but never fails; a request whose context ends first is not
// made. Its snapshots are the memory backend's (a Lease's watch).
type slowButSure struct {
	*memory.Backend
	latency time.Duration
}

func (s slowButSure) wait(ctx context.Context) error {
	timer := time.NewTimer(s.latency)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slowButSure) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	if err := s.wait(ctx); err != nil {
		return backend.Record{}, "", err
	}
	return s.Backend.Get(ctx)
}

func (s slowButSure) Create(ctx context.Context, r backend.Record) (backend.Version, error) {
	if err := s.wait(ctx); err != nil {
		return "", err
	}
	return s.Backend.Create(ctx, r)
}

func (s slowButSure) CreateFirst(ctx context.Context, r backend.Record) (backend.Version, error) {
	if err := s.wait(ctx); err != nil {
		return "", err
	}
	return s.Backend.CreateFirst(ctx, r)
}

func (s slowButSure) Update(ctx context.Context, v backend.Version, r backend.Record) (backend.Version, error) {
	if err := s.wait(ctx); err != nil {
		return "", err
	}
	return s.Backend.Update(ctx, v, r)
}

// A store that answers every request within the claim, however slowly,
// keeps a leader: a try is not cut off sooner than the store has been
// answering. Two candidates, every request answered after the latency;
// 3,000 samples 100ms apart after the first leader, none with two
// leaders. The first term, won by a read and a write, leaves its leader
// 10s minus two latencies of claim, too little for a renewal: that lapse,
// once, is all the time without a leader (before, a renewal was cut off
// 1s before the claim ended, and from 4.1s up more than half the samples
// had no leader).
func TestSlowButSureStoreKeepsALeader(t *testing.T) {
	for _, latency := range []time.Duration{3 * time.Second, 4100 * time.Millisecond, 4500 * time.Millisecond, 4900 * time.Millisecond} {
		t.Run(latency.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memory.NewStore()
				all := []*running{
					start(t, slowButSure{store.Open("loop"), latency}, "a", false),
					start(t, slowButSure{store.Open("loop"), latency}, "b", false),
				}
				for len(leaders(all...)) == 0 {
					time.Sleep(100 * time.Millisecond)
				}
				const samples = 3000
				leaderless, two := 0, 0
				for range samples {
					time.Sleep(100 * time.Millisecond)
					switch len(leaders(all...)) {
					case 0:
						leaderless++
					case 2:
						two++
					}
				}
				t.Logf("latency %v: of %d samples, %d leaderless, %d with two leaders", latency, samples, leaderless, two)
				// The first lapse: the renewal cut off at the end of the
				// first claim is retried a jittered retry period after it
				// started, and answered one latency later.
				lapse := int((latency + jittered(DefaultRetryPeriod, 1)) / (100 * time.Millisecond))
				if two > 0 || leaderless > lapse {
					t.Fatalf("latency %v: of %d samples, %d leaderless (want at most %d: the first lapse), %d with two leaders (want 0)",
						latency, samples, leaderless, lapse, two)
				}
			})
		})
	}
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
// its leader: at the defaults, up to 4s a request (docs/election.md), the
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

// failsFast fails every request in a millisecond while down is set.
type failsFast struct {
	*counting
	down atomic.Bool
}

func (f *failsFast) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	if f.down.Load() {
		f.gets.Add(1)
		time.Sleep(time.Millisecond)
		return backend.Record{}, "", errUnreachable
	}
	return f.counting.Get(ctx)
}

func (f *failsFast) Update(ctx context.Context, v backend.Version, r backend.Record) (backend.Version, error) {
	if f.down.Load() {
		f.updates.Add(1)
		time.Sleep(time.Millisecond)
		return "", errUnreachable
	}
	return f.counting.Update(ctx, v, r)
}

func TestLeaderWaitsBetweenTriesWhileItsStoreFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &failsFast{counting: &counting{Backend: memory.NewStore().Open("loop")}}
		a := start(t, b, "a", false)
		time.Sleep(time.Second)
		if !a.Status().Leader {
			t.Fatal("a does not lead")
		}
		b.down.Store(true)
		before := b.requests()
		time.Sleep(20 * time.Second)
		// One try per retry period at most (2s, up to 20% more).
		if n := b.requests() - before; n > 11 {
			t.Fatalf("%d requests in 20s against a store that fails fast, want at most 11", n)
		}
		if a.Status().Leader {
			t.Fatal("a still claims after 20s without a renewal")
		}
	})
}

// losable is a store that can be replaced under its candidate.
type losable struct {
	*memory.Backend // keeps CreateFirst: a first start leads at once
	lost            chan struct{}
}

func (l *losable) Lost() <-chan struct{} { return l.lost }

func TestLeaderStopsAtOnceWhenItsStoreIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &losable{Backend: memory.NewStore().Open("loop"), lost: make(chan struct{})}
		e, err := New(Config{Backend: l, Identity: "a", Logger: quietLogger(), ReleaseOnCancel: true})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- e.Run(t.Context()) }()
		time.Sleep(time.Second)
		if !e.Status().Leader {
			t.Fatal("a does not lead")
		}
		close(l.lost)
		synctest.Wait() // no virtual time passes
		if e.Status().Leader {
			t.Fatal("a still claims after its store was lost")
		}
		if err := <-done; !errors.Is(err, backend.ErrStoreLost) {
			t.Fatalf("Run returned %v, want an error wrapping ErrStoreLost", err)
		}
	})
}

// lostOnRead answers every request with ErrStoreLost once lost is set: a
// loss found by a check on the request rather than signalled.
type lostOnRead struct {
	*memory.Backend // keeps CreateFirst: a first start leads at once
	lost            atomic.Bool
}

func (l *lostOnRead) Update(ctx context.Context, v backend.Version, r backend.Record) (backend.Version, error) {
	if l.lost.Load() {
		return "", backend.ErrStoreLost
	}
	return l.Backend.Update(ctx, v, r)
}

func TestRunEndsWhenARequestFindsTheStoreLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &lostOnRead{Backend: memory.NewStore().Open("loop")}
		e, err := New(Config{Backend: l, Identity: "a", Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- e.Run(t.Context()) }()
		time.Sleep(time.Second)
		l.lost.Store(true)
		if err := <-done; !errors.Is(err, backend.ErrStoreLost) {
			t.Fatalf("Run returned %v, want an error wrapping ErrStoreLost", err)
		}
		if e.Status().Leader {
			t.Fatal("a claims after Run ended")
		}
	})
}

// The tests below take the loop through its Driver on a fake clock: each
// Attempt returns the wait Run would set its timer to, and the test steps
// the clock by exactly that, so every store request happens at an instant
// the test knows.

// clocked counts a handle's requests and can make them slow (the clock
// steps forward inside the request, before the store answers) or fail.
type clocked struct {
	*memory.Backend // keeps CreateFirst: a first start leads at once
	clock           *clocktesting.FakeClock
	latency         time.Duration
	fail            error
	updates         []time.Time // when each Update reached the store
	gets            int
}

func (c *clocked) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	c.gets++
	c.clock.Step(c.latency)
	if c.fail != nil {
		return backend.Record{}, "", c.fail
	}
	return c.Backend.Get(ctx)
}

func (c *clocked) Update(ctx context.Context, v backend.Version, r backend.Record) (backend.Version, error) {
	c.clock.Step(c.latency)
	if c.fail != nil {
		return "", c.fail
	}
	c.updates = append(c.updates, c.clock.Now())
	return c.Backend.Update(ctx, v, r)
}

func (c *clocked) writesIn(from, to time.Time) int {
	n := 0
	for _, at := range c.updates {
		if at.After(from) && !at.After(to) {
			n++
		}
	}
	return n
}

// driven is one elector on a fake clock and the wait before its next
// attempt.
type driven struct {
	t     *testing.T
	e     *Elector
	d     Driver
	clock *clocktesting.FakeClock
	store *clocked
	wait  time.Duration
}

func drive(t *testing.T, cfg Config, jitter float64) *driven {
	t.Helper()
	clock := clocktesting.NewFakeClock(epoch)
	store := &clocked{Backend: memory.NewStore().Open("interval"), clock: clock}
	cfg.Backend, cfg.Identity, cfg.Clock, cfg.Logger = store, "a", clock, quietLogger()
	cfg.Jitter = func() float64 { return jitter }
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &driven{t: t, e: e, d: e.Driver(), clock: clock, store: store}
	r.attempt()
	if !e.Status().Leader {
		t.Fatal("a does not lead after its first attempt on an empty store")
	}
	return r
}

// attempt makes one attempt now and remembers the wait it asks for.
func (r *driven) attempt() { r.wait = r.d.Attempt(r.t.Context()) }

// next waits as Run would, then makes the next attempt.
func (r *driven) next() {
	r.clock.Step(r.wait)
	r.attempt()
}

func TestLeaderRenewsOncePerRenewInterval(t *testing.T) {
	cases := []struct {
		name           string
		cfg            Config
		interval       time.Duration
		writesInMinute int
	}{
		{"defaults: a third of the lease", Config{}, 5 * time.Second, 12},
		{"a longer lease", Config{LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second}, 10 * time.Second, 6},
		{"given", Config{RenewInterval: 2500 * time.Millisecond}, 2500 * time.Millisecond, 24},
		{"short timings", Config{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}, time.Second, 60},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := drive(t, c.cfg, 0.5)
			if r.wait != c.interval {
				t.Fatalf("first wait after acquiring %v, want the renew interval %v", r.wait, c.interval)
			}
			start, gets := r.clock.Now(), r.store.gets
			for r.clock.Since(start) < time.Minute {
				r.next()
				if r.wait != c.interval || !r.e.Status().Leader {
					t.Fatalf("at +%v: wait %v, leader %v; want %v and leading", r.clock.Since(start), r.wait, r.e.Status().Leader, c.interval)
				}
			}
			if n := r.store.writesIn(start, start.Add(time.Minute)); n != c.writesInMinute {
				t.Fatalf("%d writes in a minute of leading, want %d", n, c.writesInMinute)
			}
			if n := r.store.gets - gets; n != 0 {
				t.Fatalf("%d reads: a leader's renewal is one conditional update", n)
			}
		})
	}
}

var errDown = errors.New("store down")

func TestFailedRenewalIsRetriedAfterTheRetryPeriod(t *testing.T) {
	interval := DefaultRenewInterval(DefaultLeaseDuration, DefaultRenewDeadline, DefaultRetryPeriod)
	for _, jitter := range []float64{0, 0.5, 0.999} {
		r := drive(t, Config{}, jitter)
		s := r.clock.Now() // start of the last successful renewal (the acquire)
		retry := jittered(DefaultRetryPeriod, jitter)
		r.store.fail = errDown
		r.next() // the renewal at s+5s fails
		if r.wait != retry {
			t.Fatalf("jitter %v: wait after a failed renewal %v, want the jittered retry period %v, not the renew interval",
				jitter, r.wait, retry)
		}
		r.next() // the first retry fails too
		if r.wait != retry || !r.e.Status().Leader {
			t.Fatalf("jitter %v: after the first retry: wait %v, leader %v; want %v and leading", jitter, r.wait, r.e.Status().Leader, retry)
		}
		// The second retry, the last try that starts before s+10s (three
		// tries at the defaults, as docs/election.md counts), succeeds: the
		// next renewal is due a renew interval after its start.
		r.store.fail = nil
		r.clock.Step(r.wait)
		retried := r.clock.Now()
		if !retried.Before(s.Add(DefaultRenewDeadline)) || retried.Add(retry).Before(s.Add(DefaultRenewDeadline)) {
			t.Fatalf("jitter %v: the second retry at +%v is not the last try before the deadline", jitter, retried.Sub(s))
		}
		r.attempt()
		if !r.e.Status().Leader || r.wait != interval {
			t.Fatalf("jitter %v: after a successful retry: leader %v, wait %v; want leading and %v", jitter, r.e.Status().Leader, r.wait, interval)
		}
		if got := r.e.Status().ValidUntil; !got.Equal(retried.Add(DefaultRenewDeadline)) {
			t.Fatalf("jitter %v: claim until +%v, want the retry's start + the renew deadline", jitter, got.Sub(s))
		}
	}
}

func TestLeaderStopsClaimingAtRenewStartPlusRenewDeadline(t *testing.T) {
	r := drive(t, Config{}, 0)
	// A renewal that takes 3s: the claim counts from its start, the next
	// renewal too.
	r.store.latency = 3 * time.Second
	r.clock.Step(r.wait)
	s := r.clock.Now()
	r.attempt()
	if got := r.e.Status().ValidUntil; !got.Equal(s.Add(DefaultRenewDeadline)) {
		t.Fatalf("validUntil %v after the renewal, want its start + renew deadline (+%v)", got.Sub(s), DefaultRenewDeadline)
	}
	if want := 5*time.Second - 3*time.Second; r.wait != want {
		t.Fatalf("wait %v after a 3s renewal, want %v: the next renewal is due 5s after this one started", r.wait, want)
	}
	// Every later request fails fast.
	r.store.latency, r.store.fail = 0, errDown
	for r.clock.Now().Add(r.wait).Before(s.Add(DefaultRenewDeadline)) {
		r.next()
	}
	r.clock.Step(s.Add(DefaultRenewDeadline).Sub(r.clock.Now()) - time.Nanosecond)
	if !r.e.Status().Leader {
		t.Fatal("stopped claiming before renew start + renew deadline")
	}
	r.clock.Step(time.Nanosecond)
	if r.e.Status().Leader {
		t.Fatal("still claims at renew start + renew deadline")
	}
}

// A renewal that outlasts the renew interval is followed at once by the
// next, so a slow store does not push the renewals past the deadline. The
// interval is 2s, so that a 3s renewal lands within the attempt's bound
// (7s of the 8s left of the claim).
func TestSlowRenewalIsFollowedAtOnce(t *testing.T) {
	r := drive(t, Config{RenewInterval: 2 * time.Second}, 0)
	r.store.latency = 3 * time.Second
	r.next()
	if !r.e.Status().Leader || r.wait != 0 {
		t.Fatalf("after a 3s renewal: leader %v, wait %v; want leading and no wait", r.e.Status().Leader, r.wait)
	}
}

// Candidates with different settings side by side, as a rolling update
// runs them: a leader with a lease of 60s (trusting records up to 600s)
// and a standby with the default 15s, trusting records up to its default
// (150s) or up to exactly 60s. The standby waits out the leader's 60s,
// not its own 15s, after the leader crashes: the bound shortens no lease
// within it. (A bound of 30s would let it lead 30s after the leader's
// last renewal, while a leader that had only paused could still claim.)
func TestStandbysWithOtherLeasesAndBoundsHonourALongerLease(t *testing.T) {
	for _, bound := range []time.Duration{0, 60 * time.Second} {
		t.Run(fmt.Sprintf("bound %v", bound), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memory.NewStore()
				run := func(id string, cfg Config) *running {
					cfg.Backend, cfg.Identity, cfg.Logger = store.Open("loop"), id, quietLogger()
					e, err := New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithCancel(t.Context())
					r := &running{Elector: e, done: make(chan struct{})}
					go func() {
						defer close(r.done)
						_ = e.Run(ctx)
					}()
					r.stop = func() { cancel(); <-r.done }
					t.Cleanup(r.stop)
					return r
				}
				a := run("a", Config{LeaseDuration: time.Minute, RenewDeadline: 40 * time.Second})
				time.Sleep(time.Second)
				b := run("b", Config{MaxRecordLeaseDuration: bound})
				time.Sleep(time.Minute)
				if soleLeader(t, a, b) != a {
					t.Fatal("a does not lead")
				}
				lastRenewal := a.Status().LastRenewal
				a.stop() // a crash: no release
				for time.Now().Before(lastRenewal.Add(time.Minute)) {
					if b.Status().Leader {
						t.Fatalf("b led %v after a's last renewal, before a's lease of 1m ran out", time.Since(lastRenewal))
					}
					time.Sleep(100 * time.Millisecond)
				}
				time.Sleep(2 * time.Second)
				if s := b.Status(); !s.Leader || s.Token != 2 {
					t.Fatalf("b 2s after a's lease ran out: %+v, want leading with token 2", s)
				}
			})
		})
	}
}

// A candidate that recreates a missing record writes it without a
// RenewTime: its claim starts with its first renewal, a lease duration
// on, and until then a reader of the record (sidecar status) can tell
// the claim is pending. That renewal writes the RenewTime.
func TestRecreatedRecordHasNoRenewTimeUntilItsClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		cut := &flaky{Backend: store.Open("loop")}
		start(t, cut, "a", false)
		time.Sleep(time.Second)
		cut.down.Store(true) // a cannot recreate what is deleted under it
		store.Delete("loop")
		c := start(t, store.Open("loop"), "c", false)
		time.Sleep(time.Second)
		rec, _, err := store.Open("loop").Get(t.Context())
		if err != nil || rec.HolderIdentity != "c" || !rec.RenewTime.IsZero() || rec.AcquireTime.IsZero() {
			t.Fatalf("after c recreated the record: %+v, %v; want c's record with an AcquireTime and no RenewTime", rec, err)
		}
		if c.Status().Leader {
			t.Fatal("c leads on the record it recreated before a lease duration passed")
		}
		time.Sleep(DefaultLeaseDuration)
		rec, _, err = store.Open("loop").Get(t.Context())
		if s := c.Status(); !s.Leader || err != nil || rec.HolderIdentity != "c" || rec.RenewTime.IsZero() || !rec.RenewTime.After(rec.AcquireTime) {
			t.Fatalf("a lease duration later: c %+v, record %+v, %v; want c leading on a record it renewed", s, rec, err)
		}
	})
}
