package election

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

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
