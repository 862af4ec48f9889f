package election

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

// hangingBackend, once hang is set, holds every request until its
// context ends, saying on entered which request it holds.
type hangingBackend struct {
	backend.Backend
	hang    atomic.Bool
	entered chan string
}

func (b *hangingBackend) held(ctx context.Context, op string) error {
	b.entered <- op
	<-ctx.Done()
	return ctx.Err()
}

func (b *hangingBackend) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	if b.hang.Load() {
		return backend.Record{}, "", b.held(ctx, "Get")
	}
	return b.Backend.Get(ctx)
}

// CreateFirst passes through: the memory store proves a record never
// created, so the first attempt claims at once.
func (b *hangingBackend) CreateFirst(ctx context.Context, rec backend.Record) (backend.Version, error) {
	return b.Backend.(backend.FirstCreator).CreateFirst(ctx, rec)
}

func (b *hangingBackend) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	if b.hang.Load() {
		return "", b.held(ctx, "Update")
	}
	return b.Backend.Update(ctx, prev, rec)
}

// boundedTimings are long enough that a bound kept on the wall clock
// would hold a test for hours: only the fake clock may end the waits.
const (
	boundedLease   = 3 * time.Hour
	boundedRenew   = 2 * time.Hour
	boundedRetry   = time.Minute
	wallGrace      = 10 * time.Second // a failure, not a wait: the passing test never uses it
	boundedStopper = "stopper"
)

func newBoundedCandidate(t *testing.T, clk *clocktesting.FakeClock) (*Elector, *hangingBackend) {
	t.Helper()
	b := &hangingBackend{Backend: memory.NewStore().Open(electionName), entered: make(chan string)}
	e, err := New(Config{
		Backend:         b,
		Identity:        boundedStopper,
		LeaseDuration:   boundedLease,
		RenewDeadline:   boundedRenew,
		RetryPeriod:     boundedRetry,
		ReleaseOnCancel: true,
		HandoffOnStop:   true,
		Revision:        "old",
		Clock:           clk,
		Logger:          quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, b
}

// awaitRequest waits for the backend to hold a request, which it gets
// only once the bound on it is set.
func awaitRequest(t *testing.T, b *hangingBackend, want string) {
	t.Helper()
	select {
	case op := <-b.entered:
		if op != want {
			t.Fatalf("the backend holds a %s, want a %s", op, want)
		}
	case <-time.After(wallGrace):
		t.Fatalf("no %s reached the backend", want)
	}
}

// TestStopIsBoundedOnTheClock: the hand-off on stop and the release after
// it end their requests once the renew deadline has passed on the
// candidate's Clock, so a caller that keeps time (a simulator) ends a
// stop whose store hangs. On the wall clock they would hang for hours.
func TestStopIsBoundedOnTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	e, b := newBoundedCandidate(t, clk)
	d := e.Driver()
	d.Attempt(t.Context())
	if !e.Status().Leader {
		t.Fatalf("%s does not lead after its first attempt: %+v", boundedStopper, e.Status())
	}
	b.hang.Store(true)
	stopped := make(chan error, 1)
	go func() { stopped <- d.Stop() }()

	awaitRequest(t, b, "Update") // the offer
	clk.Step(boundedRenew)
	awaitRequest(t, b, "Update") // the release
	clk.Step(boundedRenew)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(wallGrace):
		t.Fatalf("Stop did not return once the Clock had passed the renew deadline (%v) twice", boundedRenew)
	}
}

// TestAttemptIsBoundedOnTheClock: an attempt whose read hangs ends once
// the renew deadline has passed on the candidate's Clock, and counts as
// cut off by its bound.
func TestAttemptIsBoundedOnTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	e, b := newBoundedCandidate(t, clk)
	b.hang.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Driver().Attempt(t.Context())
	}()
	awaitRequest(t, b, "Get")
	clk.Step(boundedRenew)
	select {
	case <-done:
	case <-time.After(wallGrace):
		t.Fatalf("the attempt did not end once the Clock had passed the renew deadline (%v)", boundedRenew)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.attemptFailed || !e.attemptCutOff {
		t.Fatalf("attempt failed %v, cut off %v; want both", e.attemptFailed, e.attemptCutOff)
	}
}

// timerOnlyClock is a clock without AfterFunc: within then waits on a
// timer of the clock.
type timerOnlyClock struct{ clock.Clock }

// TestWithinEndsOnTheClock: on a clock with AfterFunc and on one with
// timers only, a bound ends its context once d has passed on the clock,
// with context.DeadlineExceeded, and not a nanosecond before; cancelled
// first, it ends with context.Canceled.
func TestWithinEndsOnTheClock(t *testing.T) {
	for _, c := range []struct {
		name string
		wrap func(*clocktesting.FakeClock) clock.Clock
	}{
		{"AfterFunc", func(f *clocktesting.FakeClock) clock.Clock { return f }},
		{"timer", func(f *clocktesting.FakeClock) clock.Clock { return timerOnlyClock{f} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := clocktesting.NewFakeClock(epoch)
			e, err := New(Config{Backend: memory.NewStore().Open(electionName), Identity: "a", Clock: c.wrap(fake), Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := e.within(t.Context(), time.Second)
			defer cancel()
			if !fake.HasWaiters() {
				t.Fatal("within set no timer on the clock")
			}
			fake.Step(time.Second - time.Nanosecond)
			if err := ctx.Err(); err != nil {
				t.Fatalf("a nanosecond before the bound: %v", err)
			}
			fake.Step(time.Nanosecond)
			select {
			case <-ctx.Done():
			case <-time.After(wallGrace):
				t.Fatal("the context did not end once the bound had passed on the clock")
			}
			if err := ctx.Err(); err != context.DeadlineExceeded {
				t.Fatalf("Err after the bound: %v, want %v", err, context.DeadlineExceeded)
			}

			early, cancelEarly := e.within(t.Context(), time.Second)
			cancelEarly()
			if err := early.Err(); err != context.Canceled {
				t.Fatalf("Err after cancel: %v, want %v", err, context.Canceled)
			}
		})
	}
}
