package election

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
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
		observed("a", "term ended token=1 reason=handed_off")(h)
		observed("b_1", "term started token=2 gap=0s")(h) // the transfer was read and renewed at one instant
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
		// The offer's conflict made it read and start a term above the edit.
		leads("a", 6)(h)
		markerStored(backend.Handoff{Phase: backend.HandoffOffer, From: "a", To: "b", Token: 6})(h)
		try("b", false)(h)
		if _, err := p.finish(h); err != nil {
			t.Fatal(err)
		}
		try("b", true)(h)
		leads("b", 7)(h)
	})
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

// startRevision starts a candidate of revision rev that, stopping as
// leader, hands off before it releases (a rollout's Pod).
func startRevision(t *testing.T, b backend.Backend, id, rev string) *running {
	t.Helper()
	return startWith(t, Config{Backend: b, Identity: id, Revision: rev, ReleaseOnCancel: true, HandoffOnStop: true})
}

// stopSampling stops r and, until it has stopped, samples all every half
// hand-off poll, failing t if two lead at once.
func stopSampling(t *testing.T, r *running, all ...*running) {
	t.Helper()
	stopped := make(chan struct{})
	go func() { r.stop(); close(stopped) }()
	for {
		select {
		case <-stopped:
			return
		default:
			if ls := leaders(all...); len(ls) > 1 {
				t.Fatalf("%d lead at once", len(ls))
			}
			time.Sleep(handoffPoll / 2)
		}
	}
}

// A stopping leader hands off to the candidate of another revision, with
// the next token, however the candidates started, and whether the old
// standby or the new one was started first; at no instant do two lead.
func TestStoppingLeaderHandsToAnotherRevision(t *testing.T) {
	for _, order := range [][]string{{"old-b", "new-c"}, {"new-c", "old-b"}} {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memory.NewStore()
				old := startRevision(t, store.Open("roll"), "old-a", "old")
				time.Sleep(time.Second)
				all := []*running{old}
				for _, id := range order {
					all = append(all, startRevision(t, store.Open("roll"), id, strings.Split(id, "-")[0]))
				}
				time.Sleep(time.Minute + DefaultRetryPeriod/2) // off the renewal schedule (TestLoopHandoff)
				if soleLeader(t, all...) != old {
					t.Fatal("old-a does not lead")
				}
				token := old.Status().Token
				stopSampling(t, old, all...)
				synctest.Wait()
				next := soleLeader(t, all[1:]...)
				if id := next.Status().Identity; id != "new-c" || next.Status().Token != token+1 {
					t.Fatalf("%s leads with token %d, want new-c with %d", id, next.Status().Token, token+1)
				}
			})
		})
	}
}

// With no candidate of another revision, the stopping leader's offer goes,
// once it has stood SameRevisionWait, to one of its own: still a hand-off,
// never a release.
func TestStoppingLeaderHandsToItsOwnRevisionWhenNoOtherIsThere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		old := startRevision(t, store.Open("roll"), "old-a", "old")
		time.Sleep(time.Second)
		b := startRevision(t, store.Open("roll"), "old-b", "old")
		time.Sleep(time.Minute + DefaultRetryPeriod/2)
		token := old.Status().Token
		began := time.Now()
		old.stop()
		synctest.Wait()
		if took := time.Since(began); took < old.SameRevisionWait() || took >= old.HandoffTimeout() {
			t.Fatalf("the hand-off took %v, want from %v to %v", took, old.SameRevisionWait(), old.HandoffTimeout())
		}
		if s := b.Status(); !s.Leader || s.Token != token+1 {
			t.Fatalf("old-b: %+v, want leader with token %d", s, token+1)
		}
	})
}

// Alone, the stopping leader's offer finds no taker: it releases after
// HandoffTimeout, as without HandoffOnStop.
func TestStoppingLeaderAloneReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		old := startRevision(t, store.Open("roll"), "old-a", "old")
		time.Sleep(time.Minute + DefaultRetryPeriod/2)
		token := old.Status().Token
		began := time.Now()
		old.stop()
		if took := time.Since(began); took < old.HandoffTimeout() {
			t.Fatalf("stopped after %v, before the offer's %v were up", took, old.HandoffTimeout())
		}
		rec, _, err := store.Open("roll").Get(t.Context())
		if err != nil || !isRelease(rec) || rec.Transitions != token || !rec.Handoff.IsZero() {
			t.Fatalf("stored %+v (%v), want the release shape at token %d", rec, err, token)
		}
	})
}

// acceptBlind is a leader's store under load: once armed, its renewals fail
// (so its claim runs out during a hand-off) and its reads do not show an
// accept of its offer, until a write of its own conflicts; the accept has
// landed by then, but the hand-off has ended without seeing it.
type acceptBlind struct {
	backend.Backend
	me        string
	mu        sync.Mutex
	armed     bool
	offer     backend.Record
	offerAt   backend.Version
	conflicts int
}

func (b *acceptBlind) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	b.mu.Lock()
	armed := b.armed
	b.mu.Unlock()
	if armed && rec.HolderIdentity == b.me && rec.Handoff.IsZero() && rec.LeaseDurationSeconds > 1 {
		return "", errors.New("renewal failed (store under load)")
	}
	v, err := b.Backend.Update(ctx, prev, rec)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil && rec.Handoff.Phase == backend.HandoffOffer:
		b.offer, b.offerAt = rec, v
	case errors.Is(err, backend.ErrConflict):
		b.conflicts++
		b.armed = false
	}
	return v, err
}

func (b *acceptBlind) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	rec, v, err := b.Backend.Get(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil && b.armed && rec.Handoff.Phase == backend.HandoffAccept && rec.Handoff.From == b.me {
		return b.offer, b.offerAt, nil
	}
	return rec, v, err
}

// A leader stopped while its store is slow: its claim runs out during the
// hand-off (its renewals fail), and the standby's accept lands without the
// leader seeing it. Its shutdown then finds the accept on its own term,
// which it stopped claiming: it releases it, and the standby that accepted
// leads at once with the next token, instead of waiting out the lease.
func TestStoppingLeaderReleasesAnAcceptItDidNotSee(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		blind := &acceptBlind{Backend: store.Open("roll"), me: "old-a"}
		old := startRevision(t, blind, "old-a", "old")
		time.Sleep(time.Second)
		b := startRevision(t, store.Open("roll"), "new-b", "new")
		time.Sleep(time.Minute + DefaultRetryPeriod/2)
		if soleLeader(t, old, b) != old {
			t.Fatal("old-a does not lead")
		}
		token := old.Status().Token
		lapse := old.Status().ValidUntil
		blind.mu.Lock()
		blind.armed = true
		blind.mu.Unlock()
		time.Sleep(time.Until(lapse) - old.HandoffTimeout()/2) // the claim runs out before the offer's timeout
		stopSampling(t, old, old, b)
		stoppedAt := time.Now()
		synctest.Wait()
		blind.mu.Lock()
		conflicts := blind.conflicts
		blind.mu.Unlock()
		if conflicts == 0 {
			t.Fatal("the leader's writes met no accept: the test did not make the case")
		}
		if s := b.Status(); !s.Leader || s.Token != token+1 || !time.Now().Equal(stoppedAt) {
			t.Fatalf("new-b %+v at +%v after old-a stopped: want leading at once with token %d", s, time.Since(stoppedAt), token+1)
		}
	})
}

// deletedOnce returns a store in which the record "roll" was created and
// deleted, so that a candidate that finds it missing claims the record it
// creates only a lease duration later (decide's deferClaim).
func deletedOnce(t *testing.T) *memory.Store {
	t.Helper()
	store := memory.NewStore()
	if _, err := store.Open("roll").Create(t.Context(), ReleaseShape(1, time.Now())); err != nil {
		t.Fatal(err)
	}
	store.Delete("roll")
	return store
}

// A candidate stopped while its claim on the record it created is pending
// releases that record once the claim could begin, and a candidate that
// came later leads then, a lease after the record was created, not a lease
// after it first saw the record (two leases in all after a rollout that
// replaces the first candidate of a new election). No one leads before.
func TestStoppedBeforeItsClaimReleasesTheRecordItCreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := deletedOnce(t)
		created := time.Now()
		first := startRevision(t, store.Open("roll"), "old-a", "old")
		time.Sleep(2 * time.Second)
		next := startRevision(t, store.Open("roll"), "new-b", "new")
		time.Sleep(time.Second)
		if ls := leaders(first, next); len(ls) != 0 {
			t.Fatalf("%d lead before the first claim could begin", len(ls))
		}
		stopSampling(t, first, first, next)
		// A second after the first claim could have begun, and a second
		// before new-b's own wait on the record would end.
		for time.Since(created) < DefaultLeaseDuration+time.Second {
			if ls := leaders(first, next); len(ls) > 1 || len(ls) == 1 && time.Since(created) < DefaultLeaseDuration {
				t.Fatalf("%v after the record was created, %d lead", time.Since(created), len(ls))
			}
			time.Sleep(handoffPoll / 2)
		}
		if s := next.Status(); !s.Leader || s.Token != 2 {
			t.Fatalf("%v after the record was created: new-b %+v, want leader with token 2", time.Since(created), s)
		}
	})
}

// Alone, a candidate stopped while its claim is pending leaves the record
// released, at the token it created, once the claim could begin.
func TestStoppedBeforeItsClaimAloneLeavesItReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := deletedOnce(t)
		first := startRevision(t, store.Open("roll"), "old-a", "old")
		time.Sleep(time.Second)
		began := time.Now()
		first.stop()
		if took := time.Since(began); took+time.Second < DefaultLeaseDuration || took > DefaultLeaseDuration {
			t.Fatalf("stopped after %v, want when the claim could begin, %v after the record was created", took+time.Second, DefaultLeaseDuration)
		}
		rec, _, err := store.Open("roll").Get(t.Context())
		if err != nil || !isRelease(rec) || rec.Transitions != 1 {
			t.Fatalf("stored %+v (%v), want the release shape at token 1", rec, err)
		}
	})
}

// startAwaiting starts a candidate of revision rev that, stopping as
// leader, releases and leaves the release for await to its replacement
// (a candidate of its Pod name) or another revision: a StatefulSet's Pod.
func startAwaiting(t *testing.T, b backend.Backend, id, rev string, await time.Duration) *running {
	t.Helper()
	return startWith(t, Config{Backend: b, Identity: id, Revision: rev, ReleaseOnCancel: true, HandoffOnStop: true, AwaitReplacement: await})
}

// sampleFor samples all every half hand-off poll for d, failing t if two
// lead at once, and returns led with each leader seen appended in turn.
func sampleFor(t *testing.T, led []string, d time.Duration, all ...*running) []string {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(handoffPoll / 2) {
		ls := leaders(all...)
		if len(ls) > 1 {
			t.Fatalf("%d lead at once", len(ls))
		}
		if len(ls) == 1 && (len(led) == 0 || led[len(led)-1] != ls[0].Status().Identity) {
			led = append(led, ls[0].Status().Identity)
		}
	}
	return led
}

// A StatefulSet replaces its highest ordinal first: its leader, stopping
// with no standby of the new revision, leaves the release to its own
// replacement (a Pod of the same name) for AwaitReplacement. The standbys
// of its revision, which the rollout replaces later, stay out, and the
// replacement, started three seconds on, leads at once with the next
// token: leadership moves once. So does a replacement of the same
// revision (the leader's Pod deleted, not rolled). With AwaitReplacement
// off, a standby of the old revision takes it (to move again when its
// turn comes).
func TestStoppingLeaderLeavesTheReleaseToItsReplacement(t *testing.T) {
	for _, c := range []struct {
		name     string
		await    time.Duration
		revision string // the replacement's
	}{
		{"rolled out", 10 * time.Second, "new"},
		{"deleted", 10 * time.Second, "old"},
		{"off", 0, "new"},
	} {
		await := c.await
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memory.NewStore()
				leader := startAwaiting(t, store.Open("web"), "web-2_a", "old", await)
				time.Sleep(time.Second)
				standbys := []*running{
					startAwaiting(t, store.Open("web"), "web-0_b", "old", await),
					startAwaiting(t, store.Open("web"), "web-1_c", "old", await),
				}
				time.Sleep(time.Minute + DefaultRetryPeriod/2)
				token := soleLeader(t, append(standbys, leader)...).Status().Token
				leader.stop()
				led := sampleFor(t, nil, 3*time.Second, standbys...)
				replacement := startAwaiting(t, store.Open("web"), "web-2_d", c.revision, await)
				led = sampleFor(t, led, time.Second, append(standbys, replacement)...)
				if await == 0 {
					if len(led) != 1 || led[0] == "web-2_d" {
						t.Fatalf("leaders in turn %q: with AwaitReplacement off, one standby of the old revision takes the release", led)
					}
					return
				}
				if !slices.Equal(led, []string{"web-2_d"}) {
					t.Fatalf("leaders in turn %q, want the replacement alone", led)
				}
				if s := replacement.Status(); !s.Leader || s.Token != token+1 {
					t.Fatalf("the replacement: %+v, want leader with token %d", s, token+1)
				}
			})
		})
	}
}

// Scaled down, the stopping leader's replacement never comes: a standby
// of its revision takes the release once it has stood AwaitReplacement,
// not before, with the next token. A standby of another revision takes it
// at once.
func TestReservedReleaseGoesToAnotherRevisionAtOnceAndToAnyoneLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const await = 10 * time.Second
		store := memory.NewStore()
		leader := startAwaiting(t, store.Open("web"), "web-1_a", "old", await)
		time.Sleep(time.Second)
		old := startAwaiting(t, store.Open("web"), "web-0_b", "old", await)
		time.Sleep(time.Minute + DefaultRetryPeriod/2)
		token := soleLeader(t, leader, old).Status().Token
		stopped := time.Now()
		leader.stop()
		led := sampleFor(t, nil, await+time.Second, old)
		if took := old.Status().TermStarted.Sub(stopped); !slices.Equal(led, []string{"web-0_b"}) || took < await || old.Status().Token != token+1 {
			t.Fatalf("leaders in turn %q, web-0_b from %v after the stop with token %d; want web-0_b from %v on, token %d",
				led, took, old.Status().Token, await, token+1)
		}

		newer := startAwaiting(t, store.Open("web"), "web-2_c", "new", await)
		time.Sleep(time.Second)
		token = old.Status().Token
		old.stop()
		if led := sampleFor(t, nil, time.Second, newer); !slices.Equal(led, []string{"web-2_c"}) || newer.Status().Token != token+1 {
			t.Fatalf("leaders in turn %q, token %d: want web-2_c, of another revision, at once with token %d", led, newer.Status().Token, token+1)
		}
	})
}

// AwaitReplacement is a setting a rolling update may change, so old and
// new replicas run with different values side by side. The marker, not
// the candidate's own setting, decides: standbys without the setting
// leave a reserved release to the replacement as those with it do; and
// a leader without it hands off as before, to a standby with it. At no
// instant do two lead.
func TestAwaitReplacementMixedAcrossReplicas(t *testing.T) {
	t.Run("leader with, standbys without", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := memory.NewStore()
			leader := startAwaiting(t, store.Open("web"), "web-2_a", "old", 10*time.Second)
			time.Sleep(time.Second)
			standbys := []*running{
				startAwaiting(t, store.Open("web"), "web-0_b", "old", 0),
				startAwaiting(t, store.Open("web"), "web-1_c", "old", 0),
			}
			time.Sleep(time.Minute + DefaultRetryPeriod/2)
			token := soleLeader(t, append(standbys, leader)...).Status().Token
			leader.stop()
			led := sampleFor(t, nil, 3*time.Second, standbys...)
			replacement := startAwaiting(t, store.Open("web"), "web-2_d", "new", 10*time.Second)
			led = sampleFor(t, led, time.Second, append(standbys, replacement)...)
			if !slices.Equal(led, []string{"web-2_d"}) || replacement.Status().Token != token+1 {
				t.Fatalf("leaders in turn %q, token %d: want the replacement alone, with token %d", led, replacement.Status().Token, token+1)
			}
		})
	})
	t.Run("leader without, standbys with", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := memory.NewStore()
			leader := startAwaiting(t, store.Open("web"), "web-2_a", "old", 0)
			time.Sleep(time.Second)
			standbys := []*running{
				startAwaiting(t, store.Open("web"), "web-0_b", "old", 10*time.Second),
				startAwaiting(t, store.Open("web"), "web-1_c", "old", 10*time.Second),
			}
			time.Sleep(time.Minute + DefaultRetryPeriod/2)
			token := soleLeader(t, append(standbys, leader)...).Status().Token
			stopSampling(t, leader, append(standbys, leader)...)
			led := sampleFor(t, nil, time.Second, standbys...)
			if len(led) != 1 || soleLeader(t, standbys...).Status().Token != token+1 {
				t.Fatalf("leaders in turn %q: want the standby the stopping leader handed off to, with token %d", led, token+1)
			}
			if rec, _, err := store.Open("web").Get(t.Context()); err != nil || rec.Handoff.Phase == backend.HandoffReserve {
				t.Fatalf("stored %+v (%v): a leader without the setting leaves no reserve", rec, err)
			}
		})
	})
}
