package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// TestClientGoElectorExcludedByBackendHolder runs client-go's real
// LeaderElector on a Lease and takes the Lease over through the backend.
// While the backend keeps its record fresh, the client-go candidate steps
// down and never writes; once the backend stops renewing, client-go takes
// over after the lease duration the backend wrote, with the next token.
func TestClientGoElectorExcludedByBackendHolder(t *testing.T) {
	const leaseSeconds = 3
	ns, name := newNamespace(t), "elector"
	b := newBackend(t, newClient(t), ns, name)
	lock := clientGoLock(ns, name)
	lock.LockConfig.Identity = "client-go-elector"

	started := make(chan struct{}, 4)
	stopped := make(chan struct{}, 4)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: leaseSeconds * time.Second,
		RenewDeadline: 2 * time.Second,
		RetryPeriod:   250 * time.Millisecond,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { started <- struct{}{} },
			OnStoppedLeading: func() { stopped <- struct{}{} },
		},
	})
	if err != nil {
		t.Fatalf("NewLeaderElector: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil { // Run returns when leadership is lost
			le.Run(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, started, 10*time.Second, "client-go to lead")

	// Take the record over through the backend, retrying while client-go's
	// renewals move the version.
	var (
		rec     backend.Record
		version backend.Version
	)
	for {
		cur, v, err := b.Get(ctxFor(t))
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		now := time.Now()
		rec = backend.Record{HolderIdentity: "sidecar", LeaseDurationSeconds: leaseSeconds,
			AcquireTime: now, RenewTime: now, Transitions: cur.Transitions + 1}
		version, err = b.Update(ctxFor(t), v, rec)
		if err == nil {
			break
		}
		if !errors.Is(err, backend.ErrConflict) {
			t.Fatalf("Update: %v", err)
		}
	}

	// Renew through the backend for longer than a lease duration past
	// client-go's renew deadline: any conflict means client-go wrote over a
	// fresh record held by someone else.
	renewUntil := time.Now().Add(leaseSeconds*time.Second + 2500*time.Millisecond)
	for time.Now().Before(renewUntil) {
		time.Sleep(250 * time.Millisecond)
		rec.RenewTime = time.Now()
		if version, err = b.Update(ctxFor(t), version, rec); err != nil {
			t.Fatalf("renewing through the backend: %v (client-go wrote while the backend's record was fresh)", err)
		}
	}
	waitFor(t, stopped, time.Second, "client-go to step down")
	select {
	case <-started:
		t.Fatal("client-go led again while the backend's record was fresh")
	default:
	}

	// Stop renewing: client-go takes over after the lease duration.
	waitFor(t, started, 10*time.Second, "client-go to take over the expired record")
	got, _, err := b.Get(ctxFor(t))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.HolderIdentity != "client-go-elector" || got.Transitions != rec.Transitions+1 {
		t.Fatalf("after the takeover: holder %q token %d, want client-go-elector with token %d",
			got.HolderIdentity, got.Transitions, rec.Transitions+1)
	}
}

// waitFor fails t unless ch delivers within d.
func waitFor(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}
