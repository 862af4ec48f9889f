package election

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

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

// statusObserver calls Status from inside the Observer, as a metrics
// exporter or an event recorder may.
type statusObserver struct {
	e     *Elector
	calls int
}

func (o *statusObserver) LeadershipChanged(bool, int64)           { o.calls++; _ = o.e.Status() }
func (o *statusObserver) RenewFailed(error)                       { _ = o.e.Status() }
func (o *statusObserver) TokenAnomaly(TokenAnomaly, int64, int64) { _ = o.e.Status() }

func TestObserverMayCallStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &statusObserver{}
		e, err := New(Config{Backend: memory.NewStore().Open("loop"), Identity: "a", Logger: quietLogger(), Observer: obs})
		if err != nil {
			t.Fatal(err)
		}
		obs.e = e
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		time.Sleep(time.Second)
		if _, err := e.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if obs.calls != 2 {
			t.Fatalf("observer told of %d leadership changes, want 2 (became leader, released)", obs.calls)
		}
	})
}

// With the default timings and a backend whose watch delivers snapshots (as
// the Lease backend's does), a standby can go a whole lease without an
// attempt: that is being idle, not being wedged.
func TestLeaderAndStandbysWithSnapshotsStayHealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		var all []*running
		for _, id := range []string{"a", "b", "c"} {
			all = append(all, start(t, snapshotting{&counting{Backend: store.Open("loop")}}, id, true))
			time.Sleep(time.Second)
		}
		for elapsed := time.Duration(0); elapsed < 3*time.Minute; elapsed += 250 * time.Millisecond {
			time.Sleep(250 * time.Millisecond)
			for _, r := range all {
				if !r.Healthy() {
					t.Fatalf("%s unhealthy after %v (%+v)", r.Status().Identity, elapsed, r.Status())
				}
			}
		}
		soleLeader(t, all...)
	})
}

// hanging blocks every Get until released, ignoring its context: a wedged
// store client.
type hanging struct {
	*memory.Backend // keeps CreateFirst: a first start leads at once
	release         chan struct{}
}

func (h *hanging) Get(context.Context) (backend.Record, backend.Version, error) {
	<-h.release
	return backend.Record{}, "", errUnreachable
}

func TestHealthyReportsAWedgedLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hanging{Backend: memory.NewStore().Open("loop"), release: make(chan struct{})}
		e := start(t, h, "a", false)
		limit := DefaultRenewDeadline + 2*time.Duration(JitterFactor*float64(DefaultRetryPeriod))
		time.Sleep(limit - time.Nanosecond)
		if !e.Healthy() {
			t.Fatal("unhealthy before the wedge limit")
		}
		time.Sleep(time.Nanosecond)
		if e.Healthy() {
			t.Fatal("healthy although the loop has not finished an attempt for the whole limit")
		}
		close(h.release)
		synctest.Wait()
		if !e.Healthy() {
			t.Fatal("still unhealthy after the store call returned")
		}
	})
}

// capturedLogs is a slog.Handler that keeps every record at Info or above.
type capturedLogs struct {
	mu      sync.Mutex
	records []slog.Record
}

func (c *capturedLogs) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (c *capturedLogs) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records = append(c.records, r.Clone())
	return nil
}
func (c *capturedLogs) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capturedLogs) WithGroup(string) slog.Handler      { return c }

// leaderChanges are the "leader changed" lines, as "holder/token" (token
// "-" when the line has none).
func (c *capturedLogs) leaderChanges() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.records {
		if !strings.HasPrefix(r.Message, "leader changed") {
			continue
		}
		if r.Level != slog.LevelInfo {
			out = append(out, "not at Info: "+r.Message)
		}
		holder, token := "?", "-"
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "holder":
				holder = a.Value.String()
			case "token":
				token = a.Value.String()
			}
			return true
		})
		out = append(out, holder+"/"+token)
	}
	return out
}

// logged makes id a candidate of h that logs to a capture.
func logged(h *harness, id string) *capturedLogs {
	h.t.Helper()
	logs := &capturedLogs{}
	handle := &hookedBackend{Backend: h.store.Open(electionName)}
	obs := &recordingObserver{}
	e, err := New(Config{Backend: handle, Identity: id, Clock: h.clock, Logger: slog.New(logs), Observer: obs})
	if err != nil {
		h.t.Fatal(err)
	}
	h.candidates[id], h.handles[id], h.observers[id] = e, handle, obs
	return logs
}

func loggedChanges(logs *capturedLogs, want ...string) step {
	return func(h *harness) {
		h.t.Helper()
		if got := logs.leaderChanges(); fmt.Sprint(got) != fmt.Sprint(want) {
			h.t.Fatalf("at +%v the standby logged leader changes %q, want %q", h.clock.Since(epoch), got, want)
		}
	}
}

// A standby logs one Info line, with the holder and token, each time who
// leads changes, and nothing while the same leader renews.
func TestStandbyLogsWhoLeadsWhenItChanges(t *testing.T) {
	h := newHarness(t)
	logs := logged(h, "s")
	for _, step := range []step{
		try("a", true), try("s", false), try("s", false), loggedChanges(logs, "a/1"),
		repeat(20, advance(2*time.Second), try("a", true), try("s", false)),
		loggedChanges(logs, "a/1"), // renewals change nothing
		release("a"), try("b", true), try("s", false), loggedChanges(logs, "a/1", "b/2"),
		deleteRecord(), try("s", false), loggedChanges(logs, "a/1", "b/2", "/-"),
		// b recreates it: a new term of the same holder.
		try("b", true), leads("b", 3), try("s", false),
		loggedChanges(logs, "a/1", "b/2", "/-", "b/3"),
		repeat(5, advance(2*time.Second), try("b", true), try("s", false)),
		loggedChanges(logs, "a/1", "b/2", "/-", "b/3"),
		// s sees the release, then its own term.
		release("b"), try("s", true), leads("s", 4),
		loggedChanges(logs, "a/1", "b/2", "/-", "b/3", "/3"),
		release("s"), advance(15 * time.Second), try("a", true), loggedChanges(logs, "a/1", "b/2", "/-", "b/3", "/3"),
		try("s", false), loggedChanges(logs, "a/1", "b/2", "/-", "b/3", "/3", "a/5"),
	} {
		step(h)
	}
}

// A standby that starts while another leads says so once.
func TestStandbyLogsTheLeaderItFindsAtStart(t *testing.T) {
	h := newHarness(t)
	logs := logged(h, "b")
	for _, s := range []step{
		try("a", true), try("b", false), try("b", false), loggedChanges(logs, "a/1"),
		advance(15 * time.Second), try("b", true), leads("b", 2), loggedChanges(logs, "a/1"),
	} {
		s(h)
	}
}

// HolderExpired follows the expiry rule: a holder's record seen unchanged
// for a lease, not a released one, not one this candidate claims, and a
// change restarts the wait.
func TestHolderExpiredFollowsTheExpiryRule(t *testing.T) {
	expired := func(id string, want bool) step {
		return func(h *harness) {
			h.t.Helper()
			if got := h.candidate(id).HolderExpired(); got != want {
				h.t.Fatalf("%s at +%v: HolderExpired %v, want %v", id, h.clock.Since(epoch), got, want)
			}
		}
	}
	h := newHarness(t)
	for _, s := range []step{
		expired("b", false), // nothing seen yet
		try("a", true), try("b", false), expired("b", false), expired("a", false),
		advance(15*time.Second - time.Nanosecond), expired("b", false),
		// a stopped claiming at +10s: its own record has expired too.
		advance(time.Nanosecond), expired("b", true), expired("a", true),
		try("a", true), expired("a", false), expired("b", true), // b has not read the renewal yet
		try("b", false), expired("b", false), // a change restarts the wait
		release("a"), try("b", true), expired("a", false), expired("b", false),
	} {
		s(h)
	}
}

// Observers passes a record beyond the lease bound on to the observers
// that take it, and skips those that do not.
func TestObserversPassOnABoundedLease(t *testing.T) {
	rec := &recordingObserver{}
	var o Observer = Observers(noObserver{}, rec)
	lo, ok := o.(LeaseBoundObserver)
	if !ok {
		t.Fatal("Observers is not a LeaseBoundObserver")
	}
	lo.LeaseDurationBounded("x", time.Hour, time.Minute)
	if want := "lease-duration-bounded holder=x declared=1h0m0s bound=1m0s"; rec.count(want) != 1 {
		t.Fatalf("told %q, want %q once", rec.events, want)
	}
}
