package apiserver

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// A leader stopped while a renewal is in flight on a real Lease: the API
// server applied the renewal, but the answer never reached the leader,
// whose shutdown cancelled the request. The release on shutdown reads back
// the record it sent (its times as the MicroTime the Lease keeps) and
// releases it, so the standby takes over at once, not a lease later.
func TestShutdownReleasesARenewalWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "lost-answer"
	client, err := kubeclient.New(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	open := func() backend.Backend {
		b, err := lease.New(lease.Options{Client: client, Namespace: ns, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	inner := open()
	hooked := &landsThenWaits{Backend: inner, landed: make(chan struct{})}
	a := runElector(t, backend.Wrapped(inner, hooked), "a")
	pollUntil(t, "a leads", 10*time.Second, func() bool { return a.Status().Leader })
	b := runElector(t, open(), "b")
	pollUntil(t, "b sees a lead", 10*time.Second, func() bool { return b.Status().Holder == "a" })
	token := a.Status().Token

	hooked.armed.Store(true)
	select {
	case <-hooked.landed:
	case <-time.After(10 * time.Second):
		t.Fatal("a sent no renewal")
	}
	stopped := time.Now()
	a.stop()
	pollUntil(t, "b leads", lostAnswerLease/2, func() bool { return b.Status().Leader })
	t.Logf("b led %v after a stopped", time.Since(stopped).Round(time.Millisecond))
	k.LeaseShows(t, ns, name, "b", token+1)
}

// lostAnswerLease is the lease duration of the electors of
// TestShutdownReleasesARenewalWhoseAnswerWasLost.
const lostAnswerLease = 3 * time.Second

// landsThenWaits, once armed, makes the next Update and then answers it
// only when its context ends, with the context's error: a renewal whose
// write the API server made while its client gave up on it.
type landsThenWaits struct {
	backend.Backend
	armed  atomic.Bool
	landed chan struct{}
}

func (b *landsThenWaits) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	v, err := b.Backend.Update(ctx, prev, rec)
	if err != nil || !b.armed.CompareAndSwap(true, false) {
		return v, err
	}
	close(b.landed)
	<-ctx.Done()
	return "", ctx.Err()
}

// runningElector is an elector whose Run runs until stop, which releases.
type runningElector struct {
	*election.Elector
	stop func()
}

func runElector(t *testing.T, b backend.Backend, id string) runningElector {
	t.Helper()
	e, err := election.New(election.Config{
		Backend: b, Identity: id, ReleaseOnCancel: true,
		LeaseDuration: lostAnswerLease, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.Run(ctx); err != nil {
			t.Errorf("%s: Run: %v", id, err)
		}
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return runningElector{Elector: e, stop: stop}
}

// pollUntil fails t unless cond holds within d.
func pollUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}
