package metrics

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

type losable struct {
	backend.Backend
	lost chan struct{}
}

func (l losable) Lost() <-chan struct{} { return l.lost }

type losableSnapshotting struct{ losable }

func (losableSnapshotting) Snapshot() (backend.Record, backend.Version, bool) {
	return snapshotting{}.Snapshot()
}

func TestInstrumentingKeepsLossNotice(t *testing.T) {
	m := New(Info{})
	if _, ok := m.InstrumentBackend(memory.NewStore().Open("x")).(backend.LossNotifier); ok {
		t.Fatal("a backend that cannot lose its store gained a loss notice")
	}
	lost := make(chan struct{})
	for name, b := range map[string]backend.Backend{
		"loss only":          losable{memory.NewStore().Open("x"), lost},
		"loss and snapshots": losableSnapshotting{losable{memory.NewStore().Open("x"), lost}},
	} {
		wrapped := m.InstrumentBackend(b)
		n, ok := wrapped.(backend.LossNotifier)
		if !ok || n.Lost() != lost {
			t.Fatalf("%s: instrumenting hid the backend's loss notice", name)
		}
		_, inner := b.(backend.Snapshotter)
		if _, outer := wrapped.(backend.Snapshotter); outer != inner {
			t.Fatalf("%s: snapshots %v after instrumenting, %v before", name, outer, inner)
		}
	}
}

func TestTokenAnomaliesAreCountedByKind(t *testing.T) {
	m := New(Info{Lease: "billing"})
	m.TokenAnomaly(election.TokenRegressed, 0, 5)
	m.TokenAnomaly(election.TokenRegressed, 1, 5)
	out := scrape(t, m)
	for _, want := range []string{
		`leader_sidecar_token_anomalies_total{anomaly="token-regressed",lease="billing"} 2`,
		`leader_sidecar_token_anomalies_total{anomaly="token-exhausted",lease="billing"} 0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

func TestRecordsBeyondTheLeaseBoundAreCounted(t *testing.T) {
	m := New(Info{Lease: "billing"})
	want := `leader_sidecar_record_lease_bounded_total{lease="billing"} 0`
	if out := scrape(t, m); !strings.Contains(out, want) {
		t.Errorf("before any report: no %q in:\n%s", want, out)
	}
	m.LeaseDurationBounded("x", math.MaxInt32*time.Second, 150*time.Second)
	want = `leader_sidecar_record_lease_bounded_total{lease="billing"} 1`
	if out := scrape(t, m); !strings.Contains(out, want) {
		t.Errorf("no %q in:\n%s", want, out)
	}
}
