package election

import (
	"testing"
	"testing/synctest"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// The hand-off tests take a hand-off one store operation at a time: candidates
// other than the leader move only when a step says so, and the leader's
// Handoff runs on a goroutine of the synctest bubble, waiting on the fake
// clock between its looks at the record. synctest.Wait returns once it is
// blocked there, so each step sees a settled world.

// pendingHandoff is a Handoff running on its own goroutine.
type pendingHandoff struct {
	done   chan struct{}
	status Status
	err    error
}

// startHandoff starts id's Handoff to `to` and waits until it has written
// its offer and waits for an answer (or has returned).
func startHandoff(h *harness, id, to string) *pendingHandoff {
	p := &pendingHandoff{done: make(chan struct{})}
	e := h.candidate(id)
	go func() {
		defer close(p.done)
		p.status, p.err = e.Handoff(h.t.Context(), to)
	}()
	synctest.Wait()
	return p
}

// poll lets the leader take its next look at the record.
func poll(h *harness) {
	h.clock.Step(handoffPoll)
	synctest.Wait()
}

// finish steps the fake clock until the Handoff has returned.
func (p *pendingHandoff) finish(h *harness) (Status, error) {
	h.t.Helper()
	for range 1000 {
		select {
		case <-p.done:
			return p.status, p.err
		default:
		}
		poll(h)
	}
	h.t.Fatal("Handoff did not return within 1000 polls")
	return Status{}, nil
}

// markerStored checks the marker of the stored record.
func markerStored(want backend.Handoff) step {
	return func(h *harness) {
		h.t.Helper()
		rec, ok := h.stored()
		if !ok || rec.Handoff != want {
			h.t.Fatalf("stored marker %+v (present %v), want %+v", rec.Handoff, ok, want)
		}
	}
}

// atMostOneLeader fails unless at most one of the harness's candidates
// claims leadership now.
func atMostOneLeader(h *harness) {
	h.t.Helper()
	var ls []string
	for id, e := range h.candidates {
		if e.Status().Leader {
			ls = append(ls, id)
		}
	}
	if len(ls) > 1 {
		h.t.Fatalf("%v claim leadership at once", ls)
	}
}

// settled starts a leader "a" (token 1) and standbys that have all read
// its record.
func settled(t *testing.T, standbys ...string) *harness {
	h := newHarness(t)
	try("a", true)(h)
	for _, id := range standbys {
		try(id, false)(h)
	}
	return h
}
