package election

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

func TestHandoffTargetThatDiesAfterAcceptingCostsOneLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settled(t, "b", "c")
		p := startHandoff(h, "a", "b")
		try("b", false)(h) // accepts, then is never heard of again
		if _, err := p.finish(h); err != nil {
			t.Fatalf("Handoff: %v", err)
		}
		storedAs("b", 2)(h)
		try("c", false)(h) // sees the transfer now
		try("a", false)(h)
		advance(15*time.Second - time.Nanosecond)(h)
		try("c", false)(h)
		try("a", false)(h)
		follows("c", "b")(h)
		follows("a", "b")(h)
		advance(time.Nanosecond)(h)
		try("c", true)(h)
		leads("c", 3)(h)
		try("a", false)(h)
		atMostOneLeader(h)
	})
}

func TestHandoffLeaderWhoseClaimLapsesHandsNothingOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settled(t, "b")
		p := startHandoff(h, "a", "b")
		try("b", false)(h)
		h.clock.Step(10 * time.Second) // paused past its renew deadline
		synctest.Wait()
		status, err := p.finish(h)
		if !errors.Is(err, ErrNotLeader) || status.Leader {
			t.Fatalf("Handoff: %+v, %v; want ErrNotLeader and not leader", status, err)
		}
		storedAs("a", 1)(h)
		markerStored(backend.Handoff{Phase: backend.HandoffAccept, From: "a", To: "b", Token: 1})(h)
		follows("a", "a")(h)
		// Nobody wrote since the accept, which gives no claim: the old
		// leader may renew it by compare-and-swap, as any record it holds,
		// and carries on with its token; the accept is spent.
		try("a", true)(h)
		leads("a", 1)(h)
		markerStored(backend.Handoff{})(h)
		try("b", false)(h)
		follows("b", "a")(h)
		atMostOneLeader(h)
	})
}

func TestHandoffMarkersWithoutAnAcceptAreWaitedOut(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
	}{
		{"a transfer nobody accepted (a hand edit)", []step{
			try("a", true), try("b", false),
			handEdit(backend.Record{HolderIdentity: "b", LeaseDurationSeconds: 15, Transitions: 2,
				Handoff: backend.Handoff{Phase: backend.HandoffTransfer, From: "a", To: "b", Token: 2}}),
			try("b", false), follows("b", "b"),
			advance(15*time.Second - time.Nanosecond), try("b", false),
			advance(time.Nanosecond), try("b", true), leads("b", 3),
		}},
		{"a transfer that comes a lease after the accept", []step{
			try("a", true), try("b", false),
			handEdit(backend.Record{HolderIdentity: "a", LeaseDurationSeconds: 15, Transitions: 1,
				Handoff: backend.Handoff{Phase: backend.HandoffOffer, From: "a", To: "b", Token: 1}}),
			try("b", false), // accepts
			advance(15 * time.Second),
			handEdit(backend.Record{HolderIdentity: "b", LeaseDurationSeconds: 15, Transitions: 2,
				Handoff: backend.Handoff{Phase: backend.HandoffTransfer, From: "a", To: "b", Token: 2}}),
			try("b", false), follows("b", "b"),
		}},
		{"a transfer from another leader than the one whose offer was accepted", []step{
			try("a", true), try("b", false),
			handEdit(backend.Record{HolderIdentity: "a", LeaseDurationSeconds: 15, Transitions: 1,
				Handoff: backend.Handoff{Phase: backend.HandoffOffer, From: "a", To: "b", Token: 1}}),
			try("b", false),
			handEdit(backend.Record{HolderIdentity: "b", LeaseDurationSeconds: 15, Transitions: 2,
				Handoff: backend.Handoff{Phase: backend.HandoffTransfer, From: "x", To: "b", Token: 2}}),
			try("b", false), follows("b", "b"),
		}},
		{"an offer left behind by a client-go write (token moved on)", []step{
			handEdit(backend.Record{HolderIdentity: "client-go", LeaseDurationSeconds: 15, Transitions: 5,
				Handoff: backend.Handoff{Phase: backend.HandoffOffer, From: "a", Token: 4}}),
			try("b", false), markerStored(backend.Handoff{Phase: backend.HandoffOffer, From: "a", Token: 4}),
		}},
		{"an offer whose maker no longer holds the record", []step{
			handEdit(backend.Record{HolderIdentity: "client-go", LeaseDurationSeconds: 15, Transitions: 4,
				Handoff: backend.Handoff{Phase: backend.HandoffOffer, From: "a", Token: 4}}),
			try("b", false), markerStored(backend.Handoff{Phase: backend.HandoffOffer, From: "a", Token: 4}),
		}},
		{"an offer that expired: taken over as any record", []step{
			handEdit(backend.Record{HolderIdentity: "a", LeaseDurationSeconds: 15, Transitions: 4,
				Handoff: backend.Handoff{Phase: backend.HandoffOffer, From: "a", Token: 4}}),
			try("b", false), advance(15 * time.Second), try("b", true), leads("b", 5),
			markerStored(backend.Handoff{}),
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

// A leader may have seen a token above its own term's: after a reset, a
// late change signal can show it a record from before (a token raised by
// hand, since deleted). The transfer then starts the new term above every
// token the leader has seen, never at one it saw, and the target leads
// with it.
func TestHandoffTransfersAboveTheHighestTokenTheLeaderSaw(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settled(t, "b")
		a := h.candidate("a")
		a.mu.Lock()
		a.highestToken = 4 // as a stale snapshot of the raised record left it
		a.mu.Unlock()
		p := startHandoff(h, "a", "b")
		try("b", false)(h) // accepts the offer at token 1
		if _, err := p.finish(h); err != nil {
			t.Fatalf("Handoff: %v", err)
		}
		storedAs("b", 5)(h)
		markerStored(backend.Handoff{Phase: backend.HandoffTransfer, From: "a", To: "b", Token: 5})(h)
		try("b", true)(h)
		leads("b", 5)(h)
		try("a", false)(h)
		atMostOneLeader(h)
	})
}

// With the last token seen, nothing is handed off and the leader keeps
// its term.
func TestHandoffWithNoTokenLeftAboveTheHighestSeen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settled(t, "b")
		a := h.candidate("a")
		a.mu.Lock()
		a.highestToken = backend.MaxTransitions
		a.mu.Unlock()
		p := startHandoff(h, "a", "b")
		try("b", false)(h)
		status, err := p.finish(h)
		if !errors.Is(err, ErrNoTaker) || !status.Leader || status.Token != 1 {
			t.Fatalf("Handoff: %+v, %v; want ErrNoTaker, still leading with token 1", status, err)
		}
		leads("a", 1)(h)
		atMostOneLeader(h)
	})
}

// A target that sits out (its app turned unhealthy) between its accept
// and the transfer releases the record transferred to it at once, token
// kept, instead of leaving the election leaderless for a lease.
func TestHandoffTargetThatSitsOutAfterAcceptingReleasesTheTransfer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settled(t, "b", "c")
		p := startHandoff(h, "a", "b")
		try("b", false)(h) // accepts
		if _, err := h.candidate("b").SitOut(h.t.Context(), "the app is unhealthy"); err != nil {
			t.Fatalf("SitOut: %v", err)
		}
		if _, err := p.finish(h); err != nil {
			t.Fatalf("Handoff: %v", err)
		}
		storedAs("b", 2)(h)
		try("b", false)(h) // sees the transfer it may not take
		storedAs("", 2)(h)
		try("c", true)(h) // a release is taken at once
		leads("c", 3)(h)
		try("a", false)(h)
		try("b", false)(h)
		atMostOneLeader(h)
	})
}
