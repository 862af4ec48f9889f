package election

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

// These tests take a hand-off one store operation at a time: candidates
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

func (p *pendingHandoff) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// storedMarker checks the marker of the stored record.
func storedMarker(h *harness, want backend.Handoff) {
	h.t.Helper()
	rec, ok := h.stored()
	if !ok || rec.Handoff != want {
		h.t.Fatalf("stored marker %+v (present %v), want %+v", rec.Handoff, ok, want)
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

func TestHandoffToANamedCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settled(t, "b_1", "c_2")
		p := startHandoff(h, "a", "b_1")
		storedMarker(h, backend.Handoff{Phase: backend.HandoffOffer, From: "a", To: "b_1", Token: 1})
		leads("a", 1)(h)
		validFor("a", 10*time.Second)(h) // the offer renewed the claim

		try("c_2", false)(h) // not the target: it leaves the offer alone
		storedMarker(h, backend.Handoff{Phase: backend.HandoffOffer, From: "a", To: "b_1", Token: 1})
		try("b_1", false)(h) // accepts, and does not lead by it
		storedMarker(h, backend.Handoff{Phase: backend.HandoffAccept, From: "a", To: "b_1", Token: 1})
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
		storedMarker(h, backend.Handoff{Phase: backend.HandoffTransfer, From: "a", To: "b_1", Token: 2})
		follows("a", "b_1")(h)
		follows("b_1", "a")(h) // has not read the transfer: leads only from its own write
		atMostOneLeader(h)

		try("b_1", true)(h)
		leads("b_1", 2)(h)
		validFor("b_1", 10*time.Second)(h)
		storedMarker(h, backend.Handoff{})
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
		storedMarker(h, backend.Handoff{Phase: backend.HandoffAccept, From: "a", To: "web-2_9f8e", Token: 1})
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
		storedMarker(h, backend.Handoff{Phase: backend.HandoffOffer, From: "a", Token: 1})
		// c reads the offer and decides to accept; b's accept lands first.
		duringNextUpdate("c", try("b", false))(h)
		try("c", false)(h)
		storedMarker(h, backend.Handoff{Phase: backend.HandoffAccept, From: "a", To: "b", Token: 1})
		try("c", false)(h) // reads b's accept: nothing left to accept
		storedMarker(h, backend.Handoff{Phase: backend.HandoffAccept, From: "a", To: "b", Token: 1})
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
				storedMarker(h, backend.Handoff{Phase: backend.HandoffOffer, From: "a", To: c.to, Token: c.token})
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
				storedMarker(h, backend.Handoff{})
				if _, ok := h.candidates["b"]; ok {
					try("b", false)(h)
				}
				leads("a", c.token)(h)
			})
		})
	}
}

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
		storedMarker(h, backend.Handoff{Phase: backend.HandoffAccept, From: "a", To: "b", Token: 1})
		follows("a", "a")(h)
		// Nobody wrote since the accept, which gives no claim: the old
		// leader may renew it by compare-and-swap, as any record it holds,
		// and carries on with its token; the accept is spent.
		try("a", true)(h)
		leads("a", 1)(h)
		storedMarker(h, backend.Handoff{})
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
			try("b", false), storedMarker2(backend.Handoff{Phase: backend.HandoffOffer, From: "a", Token: 4}),
		}},
		{"an offer whose maker no longer holds the record", []step{
			handEdit(backend.Record{HolderIdentity: "client-go", LeaseDurationSeconds: 15, Transitions: 4,
				Handoff: backend.Handoff{Phase: backend.HandoffOffer, From: "a", Token: 4}}),
			try("b", false), storedMarker2(backend.Handoff{Phase: backend.HandoffOffer, From: "a", Token: 4}),
		}},
		{"an offer that expired: taken over as any record", []step{
			handEdit(backend.Record{HolderIdentity: "a", LeaseDurationSeconds: 15, Transitions: 4,
				Handoff: backend.Handoff{Phase: backend.HandoffOffer, From: "a", Token: 4}}),
			try("b", false), advance(15 * time.Second), try("b", true), leads("b", 5),
			storedMarker2(backend.Handoff{}),
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

func storedMarker2(want backend.Handoff) step {
	return func(h *harness) { h.t.Helper(); storedMarker(h, want) }
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
		storedMarker(h, backend.Handoff{})
		leads("a", 1)(h)
	})
}

func TestHandoffAfterATokenEditedByHandStartsFromTheNewTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settled(t, "b")
		handEdit(backend.Record{HolderIdentity: "a", LeaseDurationSeconds: 15, Transitions: 5})(h)
		p := startHandoff(h, "a", "b")
		leads("a", 6)(h) // the offer's conflict made it read and start a term above the edit
		storedMarker(h, backend.Handoff{Phase: backend.HandoffOffer, From: "a", To: "b", Token: 6})
		try("b", false)(h)
		if _, err := p.finish(h); err != nil {
			t.Fatal(err)
		}
		try("b", true)(h)
		leads("b", 7)(h)
	})
}

func TestHandoffStepRules(t *testing.T) {
	offer := func(from, to string, token int64) backend.Record {
		return backend.Record{HolderIdentity: from, LeaseDurationSeconds: 15, Transitions: token,
			Handoff: backend.Handoff{Phase: backend.HandoffOffer, From: from, To: to, Token: token}}
	}
	base := func(rec backend.Record) observation {
		return observation{identity: "web-2_b", highest: rec.Transitions, ownLease: 15 * time.Second,
			view: view{known: true, present: true, sawRecord: true, rec: rec, version: "7", since: epoch}}
	}
	cases := []struct {
		name string
		o    func() observation
		now  time.Duration
		want actionKind // wait: no hand-off step
	}{
		{"an offer to anyone", func() observation { return base(offer("a", "", 3)) }, 0, accept},
		{"an offer to its identity", func() observation { return base(offer("a", "web-2_b", 3)) }, 0, accept},
		{"an offer to its Pod name", func() observation { return base(offer("a", "web-2", 3)) }, 0, accept},
		{"an offer to another Pod", func() observation { return base(offer("a", "web-1", 3)) }, 0, wait},
		{"its own offer", func() observation { return base(offer("web-2_b", "", 3)) }, 0, wait},
		{"an offer a lease old", func() observation { return base(offer("a", "", 3)) }, 15 * time.Second, wait},
		{"an offer below a token seen", func() observation { o := base(offer("a", "", 3)); o.highest = 4; return o }, 0, wait},
		{"an offer at the last token", func() observation { return base(offer("a", "", backend.MaxTransitions)) }, 0, wait},
		{"an offer from a holder that is not its maker", func() observation {
			rec := offer("a", "", 3)
			rec.HolderIdentity = "x"
			return base(rec)
		}, 0, wait},
		{"while stopping", func() observation { o := base(offer("a", "", 3)); o.stopped = true; return o }, 0, wait},
		{"while held off", func() observation {
			o := base(offer("a", "", 3))
			o.holdOffUntil = epoch.Add(time.Second)
			return o
		}, 0, wait},
		{"while it still counts itself leader", func() observation { o := base(offer("a", "", 3)); o.leading = true; return o }, 0, wait},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, ok := c.o().handoffStep(epoch.Add(c.now))
			if got := map[bool]actionKind{true: a.kind, false: wait}[ok]; got != c.want {
				t.Fatalf("handoffStep: %v (ok %v), want %v", a.kind, ok, c.want)
			}
		})
	}
}

// TestLoopHandoff runs three candidates' loops on one memory store in
// virtual time: the accept rides the change signal, so the hand-off is
// done at the leader's first poll after its offer, with the next token,
// and the new leader keeps leading.
func TestLoopHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		var all []*running
		for _, id := range []string{"a", "b", "c"} {
			all = append(all, start(t, store.Open("loop"), id, true))
		}
		// Off the renewal schedule: a renewal due at the very instant of
		// the hand-off would wait for it on a mutex, which a synctest
		// bubble does not count as blocked, and virtual time would stop.
		time.Sleep(time.Minute + DefaultRetryPeriod/2)
		old := soleLeader(t, all...)
		token := old.Status().Token
		target := others(all, old)[0]

		began := time.Now()
		status, err := old.Handoff(t.Context(), target.Status().Identity)
		if err != nil || status.Leader || status.Holder != target.Status().Identity {
			t.Fatalf("Handoff: %+v, %v", status, err)
		}
		synctest.Wait()
		if took := time.Since(began); took != handoffPoll {
			t.Fatalf("the hand-off took %v of virtual time, want one poll (%v)", took, handoffPoll)
		}
		if soleLeader(t, all...) != target || target.Status().Token != token+1 {
			t.Fatalf("after the hand-off: %+v leads, want %s with token %d", soleLeader(t, all...).Status(), target.Status().Identity, token+1)
		}
		for range 100 {
			time.Sleep(DefaultRetryPeriod)
			if s := soleLeader(t, all...); s != target || s.Status().Token != token+1 {
				t.Fatalf("leadership moved on after the hand-off: %+v", s.Status())
			}
		}
	})
}
