package election

import (
	"errors"
	"testing"
	"time"
)

// A TermObserver hears how every term began, with the gap the new leader
// saw, and why it ended. The defaults: lease 15s, renew deadline 10s.
func TestTermsAreReportedWithGapAndReason(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
	}{
		{"the first term of an election has no gap", []step{
			try("a", true), observed("a", "term started token=1 gap=none"),
		}},
		{"a take-over after expiry: the gap runs from the first sight of the last renewal", []step{
			try("a", true), advance(time.Second), try("b", false), // b sees a's record at +1s
			advance(15 * time.Second), try("b", true),
			observed("b", "term started token=2 gap=15s"),
			try("a", false), observedTimes("a", "term ended token=1 reason=lost", 1),
		}},
		{"a take-over after a release: the gap runs from the first sight of the release", []step{
			try("a", true), try("b", false), advance(3 * time.Second), release("a"),
			observed("a", "term ended token=1 reason=released"),
			try("b", true), observed("b", "term started token=2 gap=0s"),
		}},
		{"a take-over of a record found missing: the gap runs from the first sight of the absence", []step{
			try("a", true), try("b", false), storeFails(errors.New("store down")), advance(11 * time.Second),
			stepOnce("a"), storeFails(nil), deleteRecord(), try("b", false), advance(15 * time.Second),
			try("b", false), advance(15 * time.Second), try("b", true),
			observed("b", "term started token=2 gap=30s"),
		}},
		{"a leader that cannot renew within its deadline has lost its term", []step{
			try("a", true), storeFails(errors.New("store down")), advance(11 * time.Second),
			stepOnce("a"), observed("a", "term ended token=1 reason=lost"),
		}},
		{"a leader stopped without release", []step{
			try("a", true), shutdown("a"), observed("a", "term ended token=1 reason=stopped"),
		}},
		{"a leader that sits out has released", []step{
			try("a", true), sitOut("a"), observed("a", "term ended token=1 reason=released"),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			for _, s := range c.steps {
				s(h)
			}
		})
	}
}

// Status reports when the current or last term began and when the last
// renewal began, and keeps both after the term ends.
func TestStatusReportsTermStartAndLastRenewal(t *testing.T) {
	h := newHarness(t)
	check := func(started, renewed time.Duration) {
		t.Helper()
		s := h.candidate("a").Status()
		if !s.TermStarted.Equal(epoch.Add(started)) || !s.LastRenewal.Equal(epoch.Add(renewed)) {
			t.Fatalf("term started %v, last renewal %v; want +%v and +%v", s.TermStarted, s.LastRenewal, started, renewed)
		}
	}
	if s := h.candidate("a").Status(); !s.TermStarted.IsZero() || !s.LastRenewal.IsZero() {
		t.Fatalf("before any term: %+v, want zero times", s)
	}
	try("a", true)(h)
	check(0, 0)
	advance(5 * time.Second)(h)
	try("a", true)(h)
	check(0, 5*time.Second)
	release("a")(h)
	check(0, 5*time.Second)
}

// stepOnce runs one step of id's loop: an attempt, then the deadline check.
func stepOnce(id string) step {
	return func(h *harness) { h.candidate(id).step(h.t.Context()) }
}

func shutdown(id string) step {
	return func(h *harness) {
		h.t.Helper()
		if err := h.candidate(id).shutdown(); err != nil {
			h.t.Fatalf("%s shutdown: %v", id, err)
		}
	}
}

func sitOut(id string) step {
	return func(h *harness) {
		h.t.Helper()
		if _, err := h.candidate(id).SitOut(h.t.Context(), "the app is unhealthy"); err != nil {
			h.t.Fatalf("%s SitOut: %v", id, err)
		}
	}
}
