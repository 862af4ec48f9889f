package sim

import (
	"context"
	"fmt"
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

	// elections are the records candidates contend for: one, or one per
	// shard of a group (Options.Shards).
	elections     []*contest
	renewInterval time.Duration // every candidate's
	snapshots     bool          // candidates' backends are Snapshotters (the Lease backend's kind)
	handoffs      bool          // the schedule has planned hand-offs
	handoffCount  struct{ asked, done, stopped int }
	rollout       *rollout // the schedule's rolling update, if it has one
	hostileLeases int      // hostile lease durations written (scheduleHostileLeases)
	// storeFaults are the store's restarts and failovers, if the schedule
	// has any (storefaults.go); storeRestarts says it has restarts.
	storeFaults   *storeFaults
	storeRestarts bool
	// servingFaults are the stale reads and throttling of what serves
	// the record, if the schedule has any (servingfaults.go).
	servingFaults *servingFaults
	// regressedReports counts the candidates' reports of a token lower
	// than one they saw (election.TokenRegressed).
	regressedReports int
	profile          profile

	candidates []*candidate
	started    int // candidates ever started, for identities
	violations []Violation
	group      *group // the shard group, in shard mode
	trace      trace
	quietFrom  time.Duration // no fault starts or lasts beyond this
	eventCount int
}

// event is something that happens at an instant; ties keep their order.
type event struct {
	at  time.Duration
	seq int
	fn  func()
	// bound, if set, is the timer the event fires: once it is done
	// (stopped) the event is skipped as if it had never been queued.
	bound *bound
}

// events is the queue, a binary heap ordered by (at, seq): a total order,
// so the events come out in one order however the heap is laid out. It
// is container/heap's algorithm on events themselves, which spares
// boxing each one in an interface.
type events []event

func (q events) less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}

func (q *events) push(e event) {
	*q = append(*q, e)
	h := *q
	for j := len(h) - 1; j > 0; {
		i := (j - 1) / 2 // parent
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func (q *events) pop() event {
	h := *q
	n := len(h) - 1
	h[0], h[n] = h[n], h[0]
	for i := 0; ; {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && h.less(r, j) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
	e := h[n]
	h[n] = event{} // let its closure go
	*q = h[:n]
	return e
}

func (w *world) at(t time.Duration, fn func()) {
	w.seq++
	w.queue.push(event{at: max(t, w.now), seq: w.seq, fn: fn})
}

func (w *world) after(d time.Duration, fn func()) { w.at(w.now+d, fn) }

// atBound queues the expiry of a bound (driftingClock.AfterFunc).
func (w *world) atBound(t time.Duration, b *bound, fn func()) {
	w.seq++
	w.queue.push(event{at: max(t, w.now), seq: w.seq, fn: fn, bound: b})
}

func (w *world) logf(format string, args ...any) {
	w.trace.add(w.now, format, args)
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
	for len(w.queue) > 0 && !w.stopped() {
		e := w.queue.pop()
		if e.bound != nil && e.bound.done {
			continue // stopped: it changes nothing, not even the time
		}
		if e.at > w.opts.Duration {
			break
		}
		w.now = e.at
		e.fn()
		w.eventCount++
		for _, el := range w.elections {
			// In a group, a shard nothing touched at this event is left
			// as it was (see contest.touched).
			if el.touched || w.group == nil {
				el.touched = false
				el.check.afterEvent(w, el)
			}
		}
		if w.group != nil && !w.stopped() {
			w.group.afterEvent(w)
		}
	}
	w.now = max(w.now, w.opts.Duration)
	for _, el := range w.elections {
		el.check.atEnd(w, el)
	}
	if w.group != nil && !w.stopped() {
		w.group.atEnd(w)
	}
	for _, c := range w.candidates {
		c.crash() // ends every parked activity
		c.retire()
	}
}

// startCandidate adds a new candidate, with a new identity, whose first
// attempt is due at once.
func (w *world) startCandidate() *candidate {
	w.started++
	id := fmt.Sprintf("c%d", w.started)
	rate := 1 + w.opts.Drift*(2*w.rng.Float64()-1)
	return w.newCandidate(w.elections[0], id, id, rate)
}

// newCandidate adds a candidate for el's record with the given identity,
// named name in the trace, whose clock runs at rate; its first attempt is
// due at once.
func (w *world) newCandidate(el *contest, identity, name string, rate float64) *candidate {
	c := &candidate{
		w:        w,
		el:       el,
		id:       name,
		identity: identity,
		calls:    make(chan *call),
		finished: make(chan struct{}),
		sleeps:   make(chan sleep),

		seenBeforeWrite: map[int64]int64{},
	}
	c.ctx, c.cancel = context.WithCancel(background)
	c.clock = &driftingClock{w: w, rate: rate, started: w.now, sleeps: c.sleeps, c: c}
	if w.rollout != nil {
		c.revision = w.rollout.revision
	}
	var b backend.Backend
	switch first := el.store.provesNeverCreated; {
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
		Backend:                b,
		Identity:               c.identity,
		LeaseDuration:          w.opts.LeaseDuration,
		RenewDeadline:          w.opts.RenewDeadline,
		RetryPeriod:            w.opts.RetryPeriod,
		RenewInterval:          w.renewInterval,
		ReleaseOnCancel:        true,
		MaxRecordLeaseDuration: w.opts.trustedRecordLease(),
		Clock:                  c.clock,
		Logger:                 discard,
		Observer:               traceObserver{c},
		Jitter:                 w.rng.Float64,
		HandoffOnStop:          w.rollout != nil,
		AwaitReplacement:       w.awaitReplacement(),
		Revision:               c.revision,
	})
	if err != nil { // Options.validate rules this out; report it all the same
		w.violate(fmt.Sprintf("%s cannot start: %v", c.id, err))
		return c
	}
	c.e, c.d = e, e.Driver()
	w.candidates = append(w.candidates, c)
	el.cands = append(el.cands, c)
	el.touched = true
	if c.revision != "" {
		w.logf("%s starts (clock rate %.4f, revision %q)", c.id, c.clock.rate, c.revision)
	} else {
		w.logf("%s starts (clock rate %.4f)", c.id, c.clock.rate)
	}
	if w.group == nil {
		c.wake()
	}
	return c
}

// liveOf returns the live candidates contending for el's record.
func (w *world) liveOf(el *contest) []*candidate {
	var out []*candidate
	for _, c := range el.cands {
		if !c.crashed {
			out = append(out, c)
		}
	}
	return out
}

func (w *world) stopped() bool { return len(w.violations) > 0 }

func (w *world) violate(what string) {
	w.logf("VIOLATION: %s", what)
	w.violations = append(w.violations, Violation{At: w.now, What: what})
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
func (o traceObserver) LeaseDurationBounded(holder string, declared, bound time.Duration) {
	o.c.w.logf("%s reports a lease duration of %v for %q, waited out as %v", o.c.id, declared, holder, bound)
}
func (o traceObserver) TokenAnomaly(a election.TokenAnomaly, seen, highest int64) {
	if a == election.TokenRegressed {
		o.c.w.regressedReports++
	}
	o.c.w.logf("%s reports %s (seen %d, highest %d)", o.c.id, a, seen, highest)
}

var background = context.Background()

// discard is every elector's logger: the trace says what happened, and a
// handler that is never enabled spares formatting lines nobody reads.
var discard = slog.New(slog.DiscardHandler)

// awaitReplacement is what the candidates of a StatefulSet's rolling
// update leave their release on stop for (rollout.go); 0 otherwise.
func (w *world) awaitReplacement() time.Duration {
	if w.rollout == nil || !w.rollout.statefulSet {
		return 0
	}
	return w.rollout.await
}
