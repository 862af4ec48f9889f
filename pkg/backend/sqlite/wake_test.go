package sqlite

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// never is a PollInterval no test outlives: a signal that comes at all
// came from a notification.
const never = time.Hour

// openPolling opens path for election with the given PollInterval and
// directory watch (nil: fsnotify's), and closes it at cleanup.
func openPolling(t *testing.T, path string, poll time.Duration, watcher func() (*fsnotify.Watcher, error)) *Backend {
	t.Helper()
	b, err := Open(ctxT(t), Options{Path: path, Election: "e", PollInterval: poll, newWatcher: watcher})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// A write by another handle reaches a watch through the directory watch,
// without waiting for the PollInterval, every time.
func TestWatchWakesOnAWriteWithoutWaitingForAPoll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	standby, leader := openPolling(t, path, never, nil), openT(t, path, "e")
	v, err := leader.Create(ctxT(t), backendtest.SampleRecord("leader", 1))
	if err != nil {
		t.Fatal(err)
	}
	changes := standby.Watch(ctxT(t))
	waitSignal(t, changes, 10*time.Second, "baseline")
	for i := range 20 {
		rec := backendtest.SampleRecord("leader", 1)
		rec.RenewTime = rec.RenewTime.Add(time.Duration(i+1) * time.Second)
		if v, err = leader.Update(ctxT(t), v, rec); err != nil {
			t.Fatal(err)
		}
		waitSignal(t, changes, 10*time.Second, "a write with a poll interval of an hour")
		if got, gotV, err := standby.Get(ctxT(t)); err != nil || gotV != v || !got.RenewTime.Equal(rec.RenewTime) {
			t.Fatalf("write %d: the standby read %v %v %v after the signal, want version %v", i, got, gotV, err, v)
		}
	}
}

// Without the directory watch (the system refused it), PollInterval still
// brings every change.
func TestWatchFallsBackToPollingWithoutADirectoryWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	standby, leader := openPolling(t, path, 20*time.Millisecond, noWatcher), openPolling(t, path, never, noWatcher)
	if len(standby.Warnings()) == 0 {
		t.Fatal("no warning about the directory watch")
	}
	changes := standby.Watch(ctxT(t))
	waitSignal(t, changes, 10*time.Second, "baseline")
	if _, err := leader.Create(ctxT(t), backendtest.SampleRecord("leader", 1)); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, changes, 10*time.Second, "a write seen by polling alone")
}

// countingGets counts a candidate's reads once they are answered, so that a
// count seen by the test is of reads whose answer the candidate has.
type countingGets struct {
	backend.Backend
	gets atomic.Int64
	// getsBeforeUpdate is gets when the first Update was sent, -1 before.
	getsBeforeUpdate atomic.Int64
}

func (c *countingGets) Update(ctx context.Context, v backend.Version, r backend.Record) (backend.Version, error) {
	c.getsBeforeUpdate.CompareAndSwap(-1, c.gets.Load())
	return c.Backend.Update(ctx, v, r)
}

func (c *countingGets) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	defer c.gets.Add(1)
	return c.Backend.Get(ctx)
}

// Two electors on one real SQLite file, each on a fake clock that never
// moves and with a PollInterval of an hour: nothing but the notification of
// the release can make the standby read. It reads once and takes over
// with the next token, every rule of the election applied to what it read
// (a release is taken at once).
func TestStandbyReadsAReleaseWithinANotification(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	elector := func(id string, b backend.Backend) (*election.Elector, func()) {
		e, err := election.New(election.Config{Backend: b, Identity: id, Clock: clock, ReleaseOnCancel: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := e.Run(ctx); err != nil {
				t.Errorf("%s: Run: %v", id, err)
			}
		}()
		stop := func() { cancel(); <-done }
		t.Cleanup(stop)
		return e, stop
	}
	within := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.After(10 * time.Second) // a guard against a hang, not a measurement
		for !cond() {
			select {
			case <-deadline:
				t.Fatalf("not within 10s of real time: %s", what)
			case <-time.After(time.Millisecond):
			}
		}
	}

	a, stopA := elector("a", openPolling(t, path, never, nil))
	within("a leads", func() bool { return a.Status().Leader })
	standby := &countingGets{Backend: openPolling(t, path, never, nil)}
	standby.getsBeforeUpdate.Store(-1)
	b, _ := elector("b", standby)
	// b's first attempt reads, and so does the one after its watch's first
	// signal, which every watch sends once it has its baseline.
	within("b reads twice and sees a lead", func() bool { return standby.gets.Load() == 2 && b.Status().Holder == "a" })
	if b.Status().Leader {
		t.Fatal("b leads beside a")
	}
	token := a.Status().Token
	before := clock.Now()

	stopA() // releases the record on the way out
	within("b takes over", func() bool { return b.Status().Leader })
	if got := b.Status().Token; got != token+1 {
		t.Fatalf("b leads with token %d after a's %d", got, token)
	}
	// (Once it leads, b reads again at the signal of its own write, as
	// every leader on a backend without snapshots does.)
	if n := standby.getsBeforeUpdate.Load(); n != 3 {
		t.Fatalf("b read the record %d times before it took over, want 3: one read after the release", n)
	}
	if !clock.Now().Equal(before) {
		t.Fatal("the clock moved: a poll could have woken b")
	}
}
