package sim

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// world is one schedule: the store, the candidates, and the events still
// to happen, in true (virtual) time. Everything runs on the caller's
// goroutine except a candidate's activity (an attempt, a release, a stop),
// which runs on a goroutine of its own while the world waits for it to
// block on a store request or finish: one goroutine runs at a time, so a
// seed replays exactly.
type world struct {
	opts  Options
	rng   *rand.Rand
	now   time.Duration
	queue events
	seq   int

	store         store
	renewInterval time.Duration // every candidate's
	snapshots     bool          // candidates' backends are Snapshotters (the Lease backend's kind)
	handoffs      bool          // the schedule has planned hand-offs
	handoffCount  struct{ asked, done, stopped int }
	profile       profile

	candidates []*candidate
	started    int // candidates ever started, for identities
	check      checker
	trace      trace
	quietFrom  time.Duration // no fault starts or lasts beyond this
	eventCount int
}

// event is something that happens at an instant; ties keep their order.
type event struct {
	at  time.Duration
	seq int
	fn  func()
}

type events []event

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q events) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)   { *q = append(*q, x.(event)) }
func (q *events) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func (w *world) at(t time.Duration, fn func()) {
	w.seq++
	heap.Push(&w.queue, event{at: max(t, w.now), seq: w.seq, fn: fn})
}

func (w *world) after(d time.Duration, fn func()) { w.at(w.now+d, fn) }

func (w *world) logf(format string, args ...any) {
	w.trace.add(w.now, fmt.Sprintf(format, args...))
}

// between returns a duration uniformly in [lo, hi].
func (w *world) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)+1))
}

func (w *world) chance(p float64) bool { return w.rng.Float64() < p }

// run plays the schedule to its end.
func (w *world) run() {
	for w.queue.Len() > 0 && !w.check.stopped() {
		e := heap.Pop(&w.queue).(event)
		if e.at > w.opts.Duration {
			break
		}
		w.now = e.at
		e.fn()
		w.eventCount++
		w.check.afterEvent(w)
	}
	w.now = max(w.now, w.opts.Duration)
	w.check.atEnd(w)
	for _, c := range w.candidates {
		c.crash() // ends every parked goroutine
	}
}

// startCandidate adds a new candidate, with a new identity, whose first
// attempt is due at once.
func (w *world) startCandidate() *candidate {
	w.started++
	c := &candidate{
		w:        w,
		id:       fmt.Sprintf("c%d", w.started),
		calls:    make(chan *call),
		finished: make(chan struct{}),
		sleeps:   make(chan sleep),

		seenBeforeWrite: map[int64]int64{},
	}
	c.ctx, c.cancel = context.WithCancel(background)
	c.clock = &driftingClock{w: w, rate: 1 + w.opts.Drift*(2*w.rng.Float64()-1), started: w.now, sleeps: c.sleeps}
	var b backend.Backend
	switch first := w.store.provesNeverCreated; {
	case w.snapshots && first:
		b = firstSnapshotHandle{snapshotHandle{handle{c}}}
	case w.snapshots:
		b = snapshotHandle{handle{c}}
	case first:
		b = firstHandle{handle{c}}
	default:
		b = handle{c}
	}
	e, err := election.New(election.Config{
		Backend:         b,
		Identity:        c.id,
		LeaseDuration:   w.opts.LeaseDuration,
		RenewDeadline:   w.opts.RenewDeadline,
		RetryPeriod:     w.opts.RetryPeriod,
		RenewInterval:   w.renewInterval,
		ReleaseOnCancel: true,
		Clock:           c.clock,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observer:        traceObserver{c},
		Jitter:          w.rng.Float64,
	})
	if err != nil { // Options.validate rules this out; report it all the same
		w.check.violate(w, fmt.Sprintf("%s cannot start: %v", c.id, err))
		return c
	}
	c.e, c.d = e, e.Driver()
	w.candidates = append(w.candidates, c)
	w.logf("%s starts (clock rate %.4f)", c.id, c.clock.rate)
	c.wake()
	return c
}

func (w *world) live() []*candidate {
	var out []*candidate
	for _, c := range w.candidates {
		if !c.crashed {
			out = append(out, c)
		}
	}
	return out
}

// traceObserver writes the elector's leadership changes into the trace.
type traceObserver struct{ c *candidate }

func (o traceObserver) LeadershipChanged(leading bool, token int64) {
	o.c.w.logf("%s %s (token %d)", o.c.id, map[bool]string{true: "became leader", false: "stopped leading"}[leading], token)
}
func (o traceObserver) RenewFailed(err error) {}
func (o traceObserver) TokenAnomaly(a election.TokenAnomaly, seen, highest int64) {
	o.c.w.logf("%s reports %s (seen %d, highest %d)", o.c.id, a, seen, highest)
}

var background = context.Background()
