package election

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

// With the default timings and a backend whose watch delivers snapshots (as
// the Lease backend's does), a standby can go a whole lease without an
// attempt: that is being idle, not being wedged.
func TestLeaderAndStandbysWithSnapshotsStayHealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		var all []*running
		for _, id := range []string{"a", "b", "c"} {
			all = append(all, start(t, snapshotting{&counting{Backend: store.Open("loop")}}, id, true))
			time.Sleep(time.Second)
		}
		for elapsed := time.Duration(0); elapsed < 3*time.Minute; elapsed += 250 * time.Millisecond {
			time.Sleep(250 * time.Millisecond)
			for _, r := range all {
				if !r.Healthy() {
					t.Fatalf("%s unhealthy after %v (%+v)", r.Status().Identity, elapsed, r.Status())
				}
			}
		}
		soleLeader(t, all...)
	})
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

// statusObserver calls Status from inside the Observer, as a metrics
// exporter or an event recorder may.
type statusObserver struct {
	e     *Elector
	calls int
}

func (o *statusObserver) LeadershipChanged(bool, int64)           { o.calls++; _ = o.e.Status() }
func (o *statusObserver) RenewFailed(error)                       { _ = o.e.Status() }
func (o *statusObserver) TokenAnomaly(TokenAnomaly, int64, int64) { _ = o.e.Status() }

func TestObserverMayCallStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &statusObserver{}
		e, err := New(Config{Backend: memory.NewStore().Open("loop"), Identity: "a", Logger: quietLogger(), Observer: obs})
		if err != nil {
			t.Fatal(err)
		}
		obs.e = e
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		time.Sleep(time.Second)
		if _, err := e.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if obs.calls != 2 {
			t.Fatalf("observer told of %d leadership changes, want 2 (became leader, released)", obs.calls)
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
