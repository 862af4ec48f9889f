package metrics

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

func TestInstrumentedBackendKeepsTheContract(t *testing.T) {
	m := New(Info{Lease: "billing", Version: "test", Backend: "memory"})
	store := memory.NewStore()
	backendtest.Run(t, func(t *testing.T, name string) backend.Backend {
		return m.InstrumentBackend(store.Open(name))
	})
}

func TestStoreLatencyCountsByOperationAndResult(t *testing.T) {
	m := New(Info{Lease: "billing", Version: "test", Backend: "memory"})
	b := m.InstrumentBackend(memory.NewStore().Open("x"))
	ctx := context.Background()
	_, _, _ = b.Get(ctx)
	v, _ := b.Create(ctx, backendtest.SampleRecord("a", 1))
	_, _ = b.Update(ctx, v, backendtest.SampleRecord("a", 1))
	_, _ = b.Update(ctx, v, backendtest.SampleRecord("a", 1))
	for _, want := range []string{
		`operation="get",result="not_found"`,
		`operation="create",result="ok"`,
		`operation="update",result="ok"`,
		`operation="update",result="conflict"`,
	} {
		if !strings.Contains(scrape(t, m), "leader_sidecar_store_request_duration_seconds_count{lease=\"billing\","+want+"} 1") {
			t.Errorf("no single observation with %s in:\n%s", want, scrape(t, m))
		}
	}
}

type fixedStatus election.Status

func (f *fixedStatus) Status() election.Status { return election.Status(*f) }

func TestGaugesFollowStatusAtScrapeTime(t *testing.T) {
	m := New(Info{Lease: "billing", Version: "v1.2.3", Backend: "sqlite"})
	s := &fixedStatus{Leader: true, Token: 42}
	m.WatchStatus(s)
	m.LeadershipChanged(true, 42)
	m.TermStarted(election.TermStart{Token: 42})
	m.RenewFailed(errors.New("x"))
	m.RenewFailed(errors.New("y"))

	out := scrape(t, m)
	for _, want := range []string{
		`leader_sidecar_is_leader{lease="billing"} 1`,
		`leader_sidecar_token{lease="billing"} 42`,
		`leader_election_master_status{name="billing"} 1`,
		`leader_sidecar_leadership_transitions_total{lease="billing",reason="acquired"} 1`,
		`leader_sidecar_leadership_transitions_total{lease="billing",reason="lost"} 0`,
		`leader_sidecar_renew_failures_total{lease="billing"} 2`,
		`leader_sidecar_build_info{backend="sqlite",goversion="go`,
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}

	*s = fixedStatus{}
	if got := testutil.ToFloat64(m.transitions.WithLabelValues(acquired)); got != 1 {
		t.Fatalf("acquired transitions %v, want 1", got)
	}
	if out := scrape(t, m); !strings.Contains(out, `leader_sidecar_is_leader{lease="billing"} 0`) ||
		!strings.Contains(out, `leader_sidecar_token{lease="billing"} 0`) || !strings.Contains(out, `leader_election_master_status{name="billing"} 0`) {
		t.Fatalf("gauges did not follow the status:\n%s", out)
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape status %d", rec.Code)
	}
	return rec.Body.String()
}

type snapshotting struct{ backend.Backend }

func (snapshotting) Snapshot() (backend.Record, backend.Version, bool) {
	return backendtest.SampleRecord("s", 3), "7", true
}

func TestInstrumentingKeepsSnapshots(t *testing.T) {
	m := New(Info{})
	// The memory backend keeps snapshots; embedded alone, it keeps none.
	plain := m.InstrumentBackend(struct{ backend.Backend }{memory.NewStore().Open("x")})
	if _, ok := plain.(backend.Snapshotter); ok {
		t.Fatal("a backend without snapshots gained one")
	}
	wrapped := m.InstrumentBackend(snapshotting{memory.NewStore().Open("x")})
	s, ok := wrapped.(backend.Snapshotter)
	if !ok {
		t.Fatal("instrumenting hid the backend's snapshots")
	}
	if rec, v, ok := s.Snapshot(); !ok || v != "7" || rec.Transitions != 3 {
		t.Fatalf("snapshot %+v %q %v", rec, v, ok)
	}
}
