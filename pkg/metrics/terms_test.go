package metrics

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// Every reason has a series from the start, at 0; each term begun counts
// as acquired and each term ended under its reason.
func TestTermsAreCountedByReason(t *testing.T) {
	m := New(Info{Lease: "billing"})
	for _, r := range []string{"acquired", "lost", "released", "handed_off", "stopped"} {
		if want := `leader_sidecar_leadership_transitions_total{lease="billing",reason="` + r + `"} 0`; !strings.Contains(scrape(t, m), want) {
			t.Errorf("no %q before any term", want)
		}
	}
	m.TermStarted(election.TermStart{Token: 1})
	m.TermEnded(election.TermEnd{Token: 1, Reason: election.TermHandedOff})
	m.TermStarted(election.TermStart{Token: 3})
	m.TermEnded(election.TermEnd{Token: 3, Reason: election.TermLost})
	m.TermStarted(election.TermStart{Token: 5})
	m.TermEnded(election.TermEnd{Token: 5, Reason: election.TermLost})
	out := scrape(t, m)
	for _, want := range []string{
		`{lease="billing",reason="acquired"} 3`, `{lease="billing",reason="lost"} 2`,
		`{lease="billing",reason="handed_off"} 1`, `{lease="billing",reason="released"} 0`,
	} {
		if !strings.Contains(out, "leader_sidecar_leadership_transitions_total"+want) {
			t.Errorf("no leader_sidecar_leadership_transitions_total%s in:\n%s", want, out)
		}
	}
}

// The gap histogram observes the gap of every term that has one, in
// seconds, and nothing for a term without (an election's first).
func TestTermGapHistogram(t *testing.T) {
	m := New(Info{Lease: "billing"})
	m.TermStarted(election.TermStart{Token: 1})
	m.TermStarted(election.TermStart{Token: 2, Gap: 15 * time.Second, HasGap: true})
	m.TermStarted(election.TermStart{Token: 3, Gap: 20 * time.Millisecond, HasGap: true})
	h := gather(t, m)["leader_sidecar_term_gap_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 15.02 {
		t.Fatalf("%d gaps summing to %vs, want 2 summing to 15.02s", h.GetSampleCount(), h.GetSampleSum())
	}
	for _, b := range h.GetBucket() {
		want := uint64(0)
		switch {
		case b.GetUpperBound() >= 15:
			want = 2
		case b.GetUpperBound() >= 0.025:
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
}

// The term start and last renewal gauges are a real elector's times, as
// Unix seconds, read at scrape time, on the bubble's fake clock; 0 before
// its first term, and kept when the term ends.
func TestTermTimestampGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(Info{Lease: "billing"})
		e, err := election.New(election.Config{
			Backend: memory.NewStore().Open("billing"), Identity: "a_1", Observer: m,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		m.WatchStatus(e)
		value := func(name string) float64 {
			t.Helper()
			return gather(t, m)[name].GetMetric()[0].GetGauge().GetValue()
		}
		if value("leader_sidecar_term_start_timestamp_seconds") != 0 || value("leader_sidecar_last_renewal_timestamp_seconds") != 0 {
			t.Fatal("timestamps before the first term are not 0")
		}
		start := float64(time.Now().UnixNano()) / 1e9
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		synctest.Wait()
		if !e.Status().Leader {
			t.Fatal("a lone candidate does not lead")
		}
		for _, name := range []string{"leader_sidecar_term_start_timestamp_seconds", "leader_sidecar_last_renewal_timestamp_seconds"} {
			if got := value(name); got != start {
				t.Fatalf("%s %v, want %v", name, got, start)
			}
		}
		time.Sleep(election.DefaultRenewInterval(election.DefaultLeaseDuration, election.DefaultRenewDeadline, election.DefaultRetryPeriod))
		synctest.Wait()
		if got := value("leader_sidecar_last_renewal_timestamp_seconds"); got != start+5 {
			t.Fatalf("last renewal %v after one renew interval, want %v", got, start+5)
		}
		if got := value("leader_sidecar_term_start_timestamp_seconds"); got != start {
			t.Fatalf("term start %v after a renewal, want %v still", got, start)
		}
		cancel()
		<-done
		if value("leader_sidecar_term_start_timestamp_seconds") != start || value("leader_sidecar_last_renewal_timestamp_seconds") != start+5 {
			t.Fatal("the timestamps changed when the term ended")
		}
		if value("leader_sidecar_is_leader") != 0 {
			t.Fatal("is_leader after Run returned")
		}
	})
}
