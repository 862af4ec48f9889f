package lease

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// TestConformance runs the shared suite with every handle on one client.
func TestConformance(t *testing.T) {
	client := newClient(t)
	ns := newNamespace(t)
	backendtest.Run(t, func(t *testing.T, name string) backend.Backend {
		return newBackend(t, client, ns, name)
	}, backendtest.CannotProveNeverCreated())
}

// TestConformanceSharedWatch runs the shared suite with every handle on
// one client and a shared watch of the namespace.
func TestConformanceSharedWatch(t *testing.T) {
	client := newClient(t)
	ns := newNamespace(t)
	backendtest.Run(t, func(t *testing.T, name string) backend.Backend {
		return newSharedBackend(t, client, ns, name)
	}, backendtest.CannotProveNeverCreated())
}

// TestConformanceSeparateClients runs the suite again with a client, and
// so a connection and rate limiter, per handle: separate processes.
func TestConformanceSeparateClients(t *testing.T) {
	ns := newNamespace(t)
	backendtest.Run(t, func(t *testing.T, name string) backend.Backend {
		return newBackend(t, newClient(t), ns, name)
	}, backendtest.CannotProveNeverCreated())
}

// TestRacingSeparateClients races Backends on separate clients for many
// rounds. In even rounds every racer has read the current version itself
// (its Update starts from what it remembers); in odd rounds only the first
// one has, so the others read before writing. Exactly one wins each round.
func TestRacingSeparateClients(t *testing.T) {
	const racers, rounds = 8, 25
	ns := newNamespace(t)
	handles := make([]*Backend, racers)
	for i := range handles {
		handles[i] = newBackend(t, newClient(t), ns, "race-clients")
	}
	version, err := handles[0].Create(ctxFor(t), backendtest.SampleRecord("start", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	for round := range rounds {
		for i, h := range handles {
			if i > 0 && round%2 == 1 {
				break
			}
			if _, v, err := h.Get(ctxFor(t)); err != nil || v != version {
				t.Fatalf("round %d: racer %d read version %q (%v), want %q", round, i, v, err, version)
			}
		}
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results = make([]error, racers)
			won     = make([]backend.Version, racers)
		)
		for i, h := range handles {
			wg.Go(func() {
				<-start
				won[i], results[i] = h.Update(ctxFor(t), version, backendtest.SampleRecord(fmt.Sprint("racer-", i), int64(round+2)))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range results {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: racers %d and %d both won from version %q", round, winner, i, version)
			case err == nil:
				winner = i
			case !errors.Is(err, backend.ErrConflict):
				t.Fatalf("round %d: racer %d: %v, want ErrConflict", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody won", round)
		}
		rec, v, err := handles[racers-1].Get(ctxFor(t))
		if err != nil || v != won[winner] || rec.HolderIdentity != fmt.Sprint("racer-", winner) {
			t.Fatalf("round %d: stored %q at %q (%v), want racer-%d at %q", round, rec.HolderIdentity, v, err, winner, won[winner])
		}
		version = v
	}
}

// TestList lists Leases through separate clients, as separate processes
// would, in a namespace of its own.
func TestList(t *testing.T) {
	ns := newNamespace(t)
	backendtest.RunList(t, func(t *testing.T, name string) backend.Backend {
		return newBackend(t, newClient(t), ns, name)
	})
}
