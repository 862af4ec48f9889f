package metrics

import (
	"context"
	"slices"
	"strings"
	"testing"
	"unicode"

	dto "github.com/prometheus/client_model/go"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

// gather scrapes m's registry, by metric name.
func gather(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range families {
		byName[f.GetName()] = f
	}
	return byName
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// newWatched is the sidecar's metrics for lease "billing", with a store
// request made so that every family has a series.
func newWatched(t *testing.T, s *fixedStatus) *Metrics {
	t.Helper()
	m := New(Info{Lease: "billing", Version: "v1", Backend: "sqlite"})
	m.WatchStatus(s)
	if _, _, err := m.InstrumentBackend(memory.NewStore().Open("x")).Get(context.Background()); err == nil {
		t.Fatal("a Get in an empty store found a record")
	}
	return m
}

// client-go's gauge: leader_election_master_status{name="<lease>"}, 1 on
// the leader and 0 elsewhere, with no other label.
func TestClientGoMasterStatusGauge(t *testing.T) {
	s := &fixedStatus{Leader: true, Token: 4}
	m := newWatched(t, s)
	for _, c := range []struct {
		status fixedStatus
		want   float64
	}{{fixedStatus{Leader: true, Token: 4}, 1}, {fixedStatus{Holder: "other_1"}, 0}, {fixedStatus{Leader: true, Token: 5}, 1}} {
		*s = c.status
		f := gather(t, m)["leader_election_master_status"]
		if f == nil || f.GetType() != dto.MetricType_GAUGE || len(f.GetMetric()) != 1 {
			t.Fatalf("leader_election_master_status: %v, want one gauge", f)
		}
		g := f.GetMetric()[0]
		if l := labels(g); len(l) != 1 || l["name"] != "billing" {
			t.Fatalf("leader_election_master_status labels %v, want only name=billing", l)
		}
		if got := g.GetGauge().GetValue(); got != c.want {
			t.Fatalf("leader_election_master_status = %v with status %+v, want %v", got, c.status, c.want)
		}
	}
}

// Every leader_sidecar_* series carries lease="billing"; the Go and process
// collectors' do not (they describe the process, not the election).
func TestEveryOwnMetricIsLabelledWithTheLease(t *testing.T) {
	m := newWatched(t, &fixedStatus{Leader: true, Token: 4})
	want := []string{
		"leader_sidecar_is_leader", "leader_sidecar_token", "leader_sidecar_leadership_transitions_total",
		"leader_sidecar_renew_failures_total", "leader_sidecar_token_anomalies_total", "leader_sidecar_record_lease_bounded_total",
		"leader_sidecar_store_request_duration_seconds", "leader_sidecar_build_info",
		"leader_sidecar_term_gap_seconds", "leader_sidecar_term_start_timestamp_seconds",
		"leader_sidecar_last_renewal_timestamp_seconds",
	}
	families := gather(t, m)
	for _, name := range want {
		if families[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	own := 0
	for name, f := range families {
		for _, series := range f.GetMetric() {
			lease, has := labels(series)["lease"]
			switch {
			case strings.HasPrefix(name, "leader_sidecar_"):
				own++
				if lease != "billing" {
					t.Errorf("%s%v: lease label %q, want billing", name, labels(series), lease)
				}
			case has:
				t.Errorf("%s%v: a lease label on a metric that is not the sidecar's own", name, labels(series))
			}
		}
	}
	if own < len(want) {
		t.Fatalf("%d leader_sidecar_* series, want at least %d", own, len(want))
	}
	if got := families["leader_sidecar_is_leader"].GetMetric()[0].GetGauge().GetValue(); got != 1 {
		t.Fatalf("leader_sidecar_is_leader = %v, want 1", got)
	}
}

// Durations are in seconds: every histogram and summary of the sidecar's
// own is named *_seconds, and so is every own metric whose name or help
// speaks of time.
func TestDurationsAreInSeconds(t *testing.T) {
	m := newWatched(t, &fixedStatus{})
	histograms := 0
	for name, f := range gather(t, m) {
		if !strings.HasPrefix(name, "leader_sidecar_") {
			continue
		}
		timed := f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY
		words := strings.FieldsFunc(strings.ToLower(name+" "+f.GetHelp()), func(r rune) bool { return !unicode.IsLetter(r) })
		for _, word := range []string{"latency", "duration", "time", "age", "period", "delay", "seconds", "milliseconds"} {
			timed = timed || slices.Contains(words, word)
		}
		if f.GetType() == dto.MetricType_HISTOGRAM {
			histograms++
		}
		if timed && !strings.HasSuffix(strings.TrimSuffix(name, "_total"), "_seconds") {
			t.Errorf("%s (%s, %q) measures time but is not named *_seconds", name, f.GetType(), f.GetHelp())
		}
	}
	if histograms == 0 {
		t.Fatal("no histogram was checked")
	}
	f := gather(t, m)["leader_sidecar_store_request_duration_seconds"]
	h := f.GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() <= 0 || h.GetSampleSum() > 1 {
		t.Fatalf("one in-memory Get observed as %d samples summing to %vs, want one of well under a second",
			h.GetSampleCount(), h.GetSampleSum())
	}
}
