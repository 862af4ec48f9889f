package election

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
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

// A renewal whose answer never arrived (a shutdown cancelled it, it timed
// out, the connection broke) may have landed. The next read that shows
// the very record it sent proves it did: the candidate releases that
// version, and a standby takes over at once. A record naming the
// candidate that it did not write so, and a record it created but never
// claimed, are still waited out. The defaults: lease 15s, renew deadline
// 10s, retry 2s.
func TestReleaseAfterARenewalWhoseAnswerWasLost(t *testing.T) {
	justUnder := time.Nanosecond
	// The renewal at +5s and 300ns: the store keeps microseconds.
	renewAt := 5*time.Second + 300*time.Nanosecond
	lost := []struct {
		name string
		err  error
	}{
		{"cancelled", context.Canceled},
		{"timed out", context.DeadlineExceeded},
		{"lost in transport", errors.New("read: connection reset by peer")},
	}
	for _, l := range lost {
		t.Run("a renewal "+l.name+" after it landed is released", func(t *testing.T) {
			h := newHarness(t)
			for _, s := range []step{
				try("a", true), try("b", false), advance(renewAt),
				nextUpdateLandsButFails("a", l.err), try("a", false), leads("a", 1),
				release("a"), storedAs("", 1), try("b", true), leads("b", 2),
			} {
				s(h)
			}
		})
	}
	ours := backend.Record{HolderIdentity: "a", LeaseDurationSeconds: 15, AcquireTime: epoch,
		RenewTime: epoch.Add(renewAt).Truncate(backend.TimePrecision), Transitions: 1}
	edited := ours
	edited.RenewTime = ours.RenewTime.Add(time.Microsecond)
	cases := []struct {
		name  string
		steps []step
	}{
		{"the renewal the lost one landed on is renewed after the claim lapsed", []step{
			// Nobody wrote over a's own write: it renews it rather than
			// wait it out as another's.
			try("a", true), try("b", false), advance(renewAt),
			nextUpdateLandsButFails("a", context.DeadlineExceeded), try("a", false), storedAs("a", 1),
			advance(6 * time.Second), follows("a", "a"), try("a", true), leads("a", 1),
		}},
		{"a record naming it with another renew time is not released", []step{
			try("a", true), try("b", false), advance(renewAt),
			nextUpdateLandsButFails("a", context.Canceled), try("a", false),
			handEdit(edited), try("b", false),
			release("a"), storedAs("a", 1), try("b", false), follows("b", "a"),
			advance(15*time.Second - justUnder), try("b", false),
			advance(justUnder), try("b", true), leads("b", 2),
		}},
		{"the record it sent, seen only after another, is not released", []step{
			// The lost renewal did land, was written over, and a copy of
			// it came back: the first record seen after it settles it.
			try("a", true), try("b", false), advance(renewAt),
			nextUpdateLandsButFails("a", context.Canceled), try("a", false),
			advance(5 * time.Second), handEdit(edited), try("a", false), follows("a", "a"),
			handEdit(ours), release("a"), storedAs("a", 1),
		}},
		{"a recreate whose claim was deferred is not released", []step{
			try("b", true), deleteRecord(), try("a", false), storedAs("a", 1), follows("a", "a"),
			release("a"), storedAs("a", 1), leads("b", 1),
		}},
		{"a deferred recreate whose answer was lost is not released", []step{
			try("b", true), deleteRecord(), nextCreateLandsButFails("a"), try("a", false),
			try("a", false), storedAs("a", 1), follows("a", "a"),
			release("a"), storedAs("a", 1), leads("b", 1),
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

// landsThenWaits applies the next Update once armed, then answers it only
// when its context ends, with the context's error: a renewal in flight
// when the run is cancelled, whose write the store has made.
type landsThenWaits struct {
	backend.Backend
	armed atomic.Bool
}

func (b *landsThenWaits) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	v, err := b.Backend.Update(ctx, prev, rec)
	if err != nil || !b.armed.CompareAndSwap(true, false) {
		return v, err
	}
	<-ctx.Done()
	return "", ctx.Err()
}

// A leader stopped while a renewal is in flight cancels it; the renewal
// had landed, so the release on shutdown finds the record it sent and
// releases it: the standby takes over at the same virtual instant.
func TestShutdownReleasesARenewalItCancelledAfterItLanded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		inner := store.Open("loop")
		hooked := &landsThenWaits{Backend: inner}
		a := start(t, backend.Wrapped(inner, hooked), "a", true)
		time.Sleep(time.Second)
		b := start(t, store.Open("loop"), "b", true)
		time.Sleep(time.Second)
		if !a.Status().Leader || b.Status().Leader {
			t.Fatalf("a %+v, b %+v: want a leading", a.Status(), b.Status())
		}
		token := a.Status().Token
		hooked.armed.Store(true)
		time.Sleep(5 * time.Second) // a renews every 5s: its renewal has landed and hangs
		synctest.Wait()
		if hooked.armed.Load() {
			t.Fatal("a sent no renewal")
		}
		stoppedAt := time.Now()
		a.stop()
		synctest.Wait()
		rec, _, err := inner.Get(t.Context())
		if err != nil || rec.HolderIdentity == "a" {
			t.Fatalf("after a stopped, the record is %+v (%v): want it released", rec, err)
		}
		if s := b.Status(); !s.Leader || s.Token != token+1 || !time.Now().Equal(stoppedAt) {
			t.Fatalf("b %+v at +%v after a stopped: want leading at once with token %d", s, time.Since(stoppedAt), token+1)
		}
	})
}
