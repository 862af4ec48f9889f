package election

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// refusedRelease is a Release by id that must be refused as not the
// leader's, naming holder, and change nothing: its status, the stored
// record, its Changed channel and its observer all stay as they were.
func refusedRelease(id, holder string) step {
	return func(h *harness) {
		h.t.Helper()
		e := h.candidate(id)
		before, changed := e.Status(), e.Changed()
		rec, present := h.stored()
		events := len(h.observers[id].events)

		s, err := e.Release(h.t.Context())
		if !errors.Is(err, ErrNotLeader) || !strings.Contains(err.Error(), `"`+holder+`"`) {
			h.t.Fatalf("%s Release: %v, want ErrNotLeader naming %q", id, err, holder)
		}
		if s != before || e.Status() != before {
			h.t.Fatalf("%s Release changed its status from %+v to %+v", id, before, s)
		}
		if after, still := h.stored(); after != rec || still != present {
			h.t.Fatalf("%s Release changed the record from %+v to %+v", id, rec, after)
		}
		select {
		case <-changed:
			h.t.Fatalf("%s Release signalled a change", id)
		default:
		}
		if n := len(h.observers[id].events); n != events {
			h.t.Fatalf("%s Release told its observer %v", id, h.observers[id].events[events:])
		}
	}
}

// The defaults: lease 15s, renew deadline 10s, retry 2s.
func TestReleaseOnAStandby(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
	}{
		{"is refused, and the standby still takes over at once when the leader releases", []step{
			try("a", true), try("b", false), refusedRelease("b", "a"),
			release("a"), storedAs("", 1), try("b", true), leads("b", 2),
		}},
		{"is refused before the candidate has seen any record", []step{
			refusedRelease("b", ""), try("b", true), leads("b", 1),
		}},
		{"is refused to a leader that has already released", []step{
			try("a", true), try("b", false), release("a"), try("a", false),
			refusedRelease("a", ""), try("b", true), leads("b", 2),
		}},
		{"that was the leader and lost does not hold it off", []step{
			try("a", true), try("b", false), advance(20 * time.Second), try("b", true),
			try("a", false), follows("a", "b"), refusedRelease("a", "b"),
			release("b"), try("a", true), leads("a", 3),
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

// A holder whose claim has lapsed (its renewals failed past the renew
// deadline) still releases the record it is named in, so standbys need not
// wait for it to expire.
func TestReleaseByALapsedHolderWritesTheRelease(t *testing.T) {
	h := newHarness(t)
	for _, s := range []step{
		try("a", true), try("b", false), advance(11 * time.Second), follows("a", "a"),
		release("a"), storedAs("", 1), try("b", true), leads("b", 2),
	} {
		s(h)
	}
}
