package election

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

func TestHandoffToANamedCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settled(t, "b_1", "c_2")
		p := startHandoff(h, "a", "b_1")
		markerStored(backend.Handoff{Phase: backend.HandoffOffer, From: "a", To: "b_1", Token: 1})(h)
		leads("a", 1)(h)
		validFor("a", 10*time.Second)(h) // the offer renewed the claim

		try("c_2", false)(h) // not the target: it leaves the offer alone
		markerStored(backend.Handoff{Phase: backend.HandoffOffer, From: "a", To: "b_1", Token: 1})(h)
		try("b_1", false)(h) // accepts, and does not lead by it
		markerStored(backend.Handoff{Phase: backend.HandoffAccept, From: "a", To: "b_1", Token: 1})(h)
		storedAs("a", 1)(h)
		leads("a", 1)(h)
		atMostOneLeader(h)

		var claimedDuringTransfer *bool
		duringNextUpdate("a", func(h *harness) {
			leader := h.candidate("a").Status().Leader
			claimedDuringTransfer = &leader
		})(h)
		status, err := p.finish(h)
		if claimedDuringTransfer == nil || *claimedDuringTransfer {
			t.Fatalf("while its transfer was in flight the leader claimed %v, want false", claimedDuringTransfer)
		}
		if err != nil || status.Leader || status.Holder != "b_1" {
			t.Fatalf("Handoff: %+v, %v; want not leader, holder b_1, no error", status, err)
		}
		storedAs("b_1", 2)(h)
		markerStored(backend.Handoff{Phase: backend.HandoffTransfer, From: "a", To: "b_1", Token: 2})(h)
		follows("a", "b_1")(h)
		follows("b_1", "a")(h) // has not read the transfer: leads only from its own write
		atMostOneLeader(h)

		try("b_1", true)(h)
		leads("b_1", 2)(h)
		validFor("b_1", 10*time.Second)(h)
		markerStored(backend.Handoff{})(h)
		try("c_2", false)(h)
		follows("c_2", "b_1")(h)
		try("a", false)(h)
		follows("a", "b_1")(h)
		observed("a", "leading=false token=1")(h)
		observed("b_1", "leading=true token=2")(h)
	})
}

func TestHandoffToAPodName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settled(t, "web-1_0b1e", "web-2_9f8e")
		p := startHandoff(h, "a", "web-2")
		try("web-1_0b1e", false)(h)
		try("web-2_9f8e", false)(h)
		markerStored(backend.Handoff{Phase: backend.HandoffAccept, From: "a", To: "web-2_9f8e", Token: 1})(h)
		if status, err := p.finish(h); err != nil || status.Holder != "web-2_9f8e" {
			t.Fatalf("Handoff: %+v, %v", status, err)
		}
		try("web-2_9f8e", true)(h)
		leads("web-2_9f8e", 2)(h)
	})
}

func TestHandoffToAnyoneGoesToOneCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settled(t, "b", "c")
		p := startHandoff(h, "a", "")
		markerStored(backend.Handoff{Phase: backend.HandoffOffer, From: "a", Token: 1})(h)
		// c reads the offer and decides to accept; b's accept lands first.
		duringNextUpdate("c", try("b", false))(h)
		try("c", false)(h)
		markerStored(backend.Handoff{Phase: backend.HandoffAccept, From: "a", To: "b", Token: 1})(h)
		try("c", false)(h) // reads b's accept: nothing left to accept
		markerStored(backend.Handoff{Phase: backend.HandoffAccept, From: "a", To: "b", Token: 1})(h)
		if status, err := p.finish(h); err != nil || status.Holder != "b" {
			t.Fatalf("Handoff: %+v, %v", status, err)
		}
		try("c", false)(h)
		try("b", true)(h)
		leads("b", 2)(h)
		follows("c", "b")(h)
		atMostOneLeader(h)
	})
}

func TestHandoffNobodyAnswers(t *testing.T) {
	cases := []struct {
		name, to, mention string
		// setup leaves "a" leading with token `token` and b as a standby.
		setup []step
		token int64
	}{
		{"a named candidate that does not exist", "ghost",
			`candidate "ghost" did not answer within 1s: it is not a live candidate`,
			[]step{try("a", true), try("b", false)}, 1},
		{"anyone, with no other candidate", "",
			"no candidate accepted the hand-off within 1s",
			[]step{try("a", true)}, 1},
		{"anyone, the only standby held off after its release", "",
			"no candidate accepted the hand-off within 1s",
			[]step{try("b", true), release("b"), try("a", true), try("b", false)}, 2},
		{"a candidate named whose identity is only alike", "b_",
			`candidate "b_" did not answer`,
			[]step{try("a", true), try("b", false)}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				for _, s := range c.setup {
					s(h)
				}
				leads("a", c.token)(h)
				p := startHandoff(h, "a", c.to)
				markerStored(backend.Handoff{Phase: backend.HandoffOffer, From: "a", To: c.to, Token: c.token})(h)
				if _, ok := h.candidates["b"]; ok {
					try("b", false)(h)
				}
				start := h.clock.Now()
				status, err := p.finish(h)
				if !errors.Is(err, ErrNoTaker) || !strings.Contains(err.Error(), c.mention) {
					t.Fatalf("Handoff: %v; want ErrNoTaker saying %q", err, c.mention)
				}
				if waited := h.clock.Since(start); waited < time.Second-2*handoffPoll || waited > time.Second+handoffPoll {
					t.Fatalf("gave up after %v of virtual time, want the 1s timeout", waited)
				}
				if !status.Leader || status.Token != c.token {
					t.Fatalf("after the failed hand-off: %+v, want still leader with token %d", status, c.token)
				}
				storedAs("a", c.token)(h)
				markerStored(backend.Handoff{})(h)
				if _, ok := h.candidates["b"]; ok {
					try("b", false)(h)
				}
				leads("a", c.token)(h)
			})
		})
	}
}

func TestHandoffRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settled(t, "b")
		if _, err := h.candidate("b").Handoff(t.Context(), "a"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("Handoff on a standby: %v, want ErrNotLeader", err)
		}
		if _, err := h.candidate("a").Handoff(t.Context(), "a"); !errors.Is(err, ErrNoTaker) || !strings.Contains(err.Error(), "itself") {
			t.Fatalf("Handoff to itself: %v, want ErrNoTaker saying so", err)
		}
		if _, err := h.candidate("a").Handoff(t.Context(), strings.Repeat("x", 2000)); !errors.Is(err, ErrNoTaker) {
			t.Fatalf("Handoff to a 2000-byte name: %v, want ErrNoTaker", err)
		}
		markerStored(backend.Handoff{})(h)
		leads("a", 1)(h)
	})
}

func TestHandoffAfterATokenEditedByHandStartsFromTheNewTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settled(t, "b")
		handEdit(backend.Record{HolderIdentity: "a", LeaseDurationSeconds: 15, Transitions: 5})(h)
		p := startHandoff(h, "a", "b")
		leads("a", 6)(h) // the offer's conflict made it read and start a term above the edit
		markerStored(backend.Handoff{Phase: backend.HandoffOffer, From: "a", To: "b", Token: 6})(h)
		try("b", false)(h)
		if _, err := p.finish(h); err != nil {
			t.Fatal(err)
		}
		try("b", true)(h)
		leads("b", 7)(h)
	})
}
