package election

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The loop tests run inside a synctest bubble: time is virtual, so the
// defaults (15s/10s/2s) run at full scale without real waiting, and a
// takeover "at once" means at the same virtual instant.

type running struct {
	*Elector
	stop func()
	done chan struct{}
}

func start(t *testing.T, b backend.Backend, id string, releaseOnCancel bool) *running {
	t.Helper()
	e, err := New(Config{Backend: b, Identity: id, ReleaseOnCancel: releaseOnCancel, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{Elector: e, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := e.Run(ctx); err != nil {
			t.Errorf("%s: Run: %v", id, err)
		}
	}()
	r.stop = func() { cancel(); <-r.done }
	t.Cleanup(r.stop)
	return r
}

func leaders(rs ...*running) []*running {
	var out []*running
	for _, r := range rs {
		if r.Status().Leader {
			out = append(out, r)
		}
	}
	return out
}

func soleLeader(t *testing.T, rs ...*running) *running {
	t.Helper()
	ls := leaders(rs...)
	if len(ls) != 1 {
		t.Fatalf("%d leaders, want exactly 1", len(ls))
	}
	return ls[0]
}

func others(all []*running, not *running) []*running {
	var out []*running
	for _, r := range all {
		if r != not {
			out = append(out, r)
		}
	}
	return out
}

func TestLoopElectsOneLeaderAndHandsOffAtOnceOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		var all []*running
		for _, id := range []string{"a", "b", "c"} {
			all = append(all, start(t, store.Open("loop"), id, true))
		}
		time.Sleep(time.Minute)
		first := soleLeader(t, all...)
		token := first.Status().Token

		first.stop()
		synctest.Wait() // no virtual time passes: the hand-off rides the change signal
		second := soleLeader(t, all...)
		if got := second.Status().Token; got != token+1 {
			t.Fatalf("token after hand-off %d, want %d", got, token+1)
		}
		if first.Status().Leader {
			t.Fatal("the stopped candidate still claims leadership")
		}
	})
}

func TestLoopCrashFailoverWaitsOutTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		all := []*running{
			start(t, store.Open("loop"), "a", false),
			start(t, store.Open("loop"), "b", false),
		}
		// Half a retry period off the renewal schedule, so the renewal and
		// the reading of the status below never fall on one instant.
		time.Sleep(30*time.Second + DefaultRetryPeriod/2)
		old := soleLeader(t, all...)
		standby := others(all, old)[0]
		crashAndExpectTakeoverAtExpiry(t, old, standby)
	})
}

// crashAndExpectTakeoverAtExpiry stops leader without a release (a crash,
// as far as the store can tell) and checks that standby takes over exactly
// when the lease runs out: not a nanosecond earlier, and at that instant.
// The standby must have seen the leader's last renewal when it was written.
func crashAndExpectTakeoverAtExpiry(t *testing.T, leader, standby *running) {
	t.Helper()
	lastRenew := leader.Status().ValidUntil.Add(-DefaultRenewDeadline)
	token := leader.Status().Token
	leader.stop()
	time.Sleep(time.Until(lastRenew.Add(DefaultLeaseDuration)) - time.Nanosecond)
	if standby.Status().Leader {
		t.Fatal("the standby took over before the lease ran out")
	}
	time.Sleep(time.Nanosecond)
	synctest.Wait()
	if s := standby.Status(); !s.Leader || s.Token != token+1 {
		t.Fatalf("standby at the lease's expiry: %+v, want leader with token %d", s, token+1)
	}
}

func TestLoopRenewsWithoutChangingTheToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		a := start(t, store.Open("loop"), "a", true)
		b := start(t, store.Open("loop"), "b", true)
		time.Sleep(time.Second)
		leader := soleLeader(t, a, b)
		token := leader.Status().Token
		for range 100 {
			time.Sleep(DefaultRetryPeriod)
			if s := leader.Status(); !s.Leader || s.Token != token {
				t.Fatalf("leader status changed to %+v during steady renewals", s)
			}
		}
	})
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

func TestChangedFiresOnLeadershipChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		e, err := New(Config{Backend: store.Open("loop"), Identity: "a", Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		changed := e.Changed()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Run(ctx) }()
		// Changed may also fire for what the candidate saw before it led
		// (the state "may have changed"); if it never fired once the
		// candidate leads, this wait would deadlock and fail the test.
		for !e.Status().Leader {
			<-changed
			changed = e.Changed()
		}
		changed = e.Changed()
		cancel()
		<-changed
		<-done
		if e.Status().Leader {
			t.Fatal("leads after Run returned")
		}
	})
}
