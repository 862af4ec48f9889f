package election

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

// These tests take the loop through its Driver on a fake clock: each
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
		// tries at the defaults, as the package doc counts), succeeds: the
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
// next, so a slow store does not push the renewals past the deadline.
func TestSlowRenewalIsFollowedAtOnce(t *testing.T) {
	r := drive(t, Config{}, 0)
	r.store.latency = 6 * time.Second
	r.next()
	if !r.e.Status().Leader || r.wait != 0 {
		t.Fatalf("after a 6s renewal: leader %v, wait %v; want leading and no wait", r.e.Status().Leader, r.wait)
	}
}
