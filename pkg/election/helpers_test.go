package election

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// running is a candidate whose loop (Run) runs on its own goroutine, started
// by start. The tests that start loops run inside a synctest bubble: time is
// virtual, so the defaults (15s/10s/2s) run at full scale without real
// waiting, and a takeover "at once" means at the same virtual instant.
type running struct {
	*Elector
	stop func()
	done chan struct{}
}

func start(t *testing.T, b backend.Backend, id string, releaseOnCancel bool) *running {
	t.Helper()
	return startWith(t, Config{Backend: b, Identity: id, ReleaseOnCancel: releaseOnCancel})
}

// startWith runs a candidate of cfg (quiet) until t ends or its stop;
// an error from Run fails t.
func startWith(t *testing.T, cfg Config) *running {
	t.Helper()
	cfg.Logger = quietLogger()
	id := cfg.Identity
	e, err := New(cfg)
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
