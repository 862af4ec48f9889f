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
	backend.Backend
	release chan struct{}
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
