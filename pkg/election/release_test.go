package election

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
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

func TestReleaseKeepsTheCandidateOutThenLetsItBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		a := start(t, store.Open("loop"), "a", true)
		time.Sleep(time.Second)
		if _, err := a.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if a.Status().Leader {
			t.Fatal("still leading after Release")
		}
		time.Sleep(DefaultLeaseDuration - time.Second)
		if a.Status().Leader {
			t.Fatal("re-acquired during the hold-off")
		}
		time.Sleep(2 * time.Second)
		if s := a.Status(); !s.Leader || s.Token != 2 {
			t.Fatalf("after the hold-off: %+v, want leader with token 2", s)
		}
	})
}

// A leader that sits out stops claiming and releases at once: a standby
// takes over at the same virtual instant with the next token, never
// before the leader stopped claiming.
func TestSitOutHandsOverAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		all := []*running{start(t, store.Open("loop"), "a", true), start(t, store.Open("loop"), "b", true)}
		time.Sleep(time.Minute)
		old := soleLeader(t, all...)
		token := old.Status().Token

		s, err := old.SitOut(t.Context(), "the app is unhealthy")
		if err != nil || s.Leader {
			t.Fatalf("SitOut: %+v, %v; want not leading, no error", s, err)
		}
		synctest.Wait() // no virtual time passes
		next := soleLeader(t, all...)
		if next == old || next.Status().Token != token+1 {
			t.Fatalf("after SitOut %s leads with %d; want the other with %d", next.Status().Identity, next.Status().Token, token+1)
		}
	})
}

// A candidate that sits out never takes the record, not even a released
// one or one whose holder is gone; after Rejoin it takes it at once.
func TestSittingOutNeverLeadsUntilRejoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		a := start(t, store.Open("loop"), "a", true)
		time.Sleep(time.Second)
		b := start(t, store.Open("loop"), "b", true)
		if _, err := b.SitOut(t.Context(), "unhealthy"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if !a.Status().Leader || b.Status().Leader {
			t.Fatal("want a leading and b sitting out")
		}
		token := a.Status().Token
		a.stop() // releases
		time.Sleep(10 * time.Minute)
		if s := b.Status(); s.Leader || s.Holder != "" {
			t.Fatalf("sitting out, b answers %+v; want no claim, and the released record seen", s)
		}
		if !b.SittingOut() {
			t.Fatal("SittingOut() = false")
		}

		b.Rejoin()
		synctest.Wait()
		if s := b.Status(); !s.Leader || s.Token != token+1 {
			t.Fatalf("after Rejoin: %+v, want leading at once with token %d", s, token+1)
		}
		if b.SittingOut() {
			t.Fatal("SittingOut() = true after Rejoin")
		}
	})
}

// A standby that sits out and rejoins while a leader renews stays a
// standby: Rejoin is no shortcut around the rules.
func TestRejoinWaitsForTheLeaderLikeAnyStandby(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, a, b := leaderAndStandby(t)
		if _, err := b.SitOut(t.Context(), "unhealthy"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		b.Rejoin()
		b.Rejoin() // twice is once
		time.Sleep(time.Minute)
		if !a.Status().Leader || b.Status().Leader {
			t.Fatalf("a %+v, b %+v: want a still leading", a.Status(), b.Status())
		}
	})
}

// SitOut on a standby changes nothing in the store.
func TestSitOutOnAStandbyWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, a, b := leaderAndStandby(t)
		before, _, err := store.Open("loop").Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.SitOut(t.Context(), "unhealthy"); err != nil {
			t.Fatal(err)
		}
		after, _, err := store.Open("loop").Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if after.HolderIdentity != before.HolderIdentity || after.Transitions != before.Transitions || !a.Status().Leader {
			t.Fatalf("record %+v after a standby sat out, was %+v", after, before)
		}
	})
}

// leaderAndStandby starts a, lets it lead, then starts b, which has seen a
// lead by the time it returns (a second later each, in synctest time).
func leaderAndStandby(t *testing.T) (store *memory.Store, a, b *running) {
	t.Helper()
	store = memory.NewStore()
	a = start(t, store.Open("loop"), "a", true)
	time.Sleep(time.Second)
	b = start(t, store.Open("loop"), "b", true)
	time.Sleep(time.Second)
	return store, a, b
}
