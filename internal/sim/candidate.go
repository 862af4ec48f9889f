package sim

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

var errCrashed = errors.New("the process crashed")

// candidate is one sidecar process: an election.Elector driven through
// its election.Driver, with a clock of its own.
type candidate struct {
	w  *world
	el *contest // the record it contends for
	// gate, when set, may refuse a write before it is sent (a shard
	// group's rule between counts, counts.go).
	gate func(backend.Record) error
	// id names it in the trace; identity is its elector's identity, the
	// same as id but in a shard group, where every shard's candidate of
	// one replica has the replica's identity.
	id, identity string
	clock        *driftingClock
	e            *election.Elector
	d            election.Driver

	// The running activity, if any: its goroutine sends each store request
	// on calls and waits for the answer; finished says it returned.
	calls    chan *call
	finished chan struct{}
	// activities hands each activity to the goroutine that runs them.
	activities chan func()
	busy       bool
	pending    *call
	then       func() // what to do when the activity finishes
	// sleeps receives the activity's waits on its clock (Clock.After);
	// sleeping is the channel of the wait in progress, if any.
	sleeps   chan sleep
	sleeping chan time.Time
	// bounds are the elector's bounds on its work not yet expired or
	// stopped (driftingClock.AfterFunc).
	bounds []*bound

	crashed bool
	// stopping is set once a graceful stop began; revision is its
	// elector's revision in a rolling update (rollout.go).
	stopping bool
	revision string
	// ctx ends when the process crashes: an activity that waits on its
	// clock (a hand-off) ends then, as the process would.
	ctx         context.Context
	cancel      context.CancelFunc
	pausedUntil time.Duration
	deferred    []func() // what arrived while paused
	wakeGen     int      // invalidates wake events scheduled before
	signalled   bool     // a change signal arrived during an activity
	wokeBusy    bool     // the loop's timer fired during an activity
	snapshot    store    // the state the watch delivered last
	// sawRecord is set once a read, a write or a snapshot showed a record.
	sawRecord bool
	// maxSeen is the highest token in any record it has read or written;
	// seenBeforeWrite, per token it wrote, what maxSeen was when it first
	// wrote that token.
	maxSeen         int64
	seenBeforeWrite map[int64]int64
	nextWait        time.Duration
}

func (c *candidate) saw(rec backend.Record) {
	c.sawRecord = true
	c.maxSeen = max(c.maxSeen, rec.Transitions)
}

// paused reports whether the process is frozen now.
func (c *candidate) paused() bool { return c.w.now < c.pausedUntil }

// whenRunning runs fn now, or when a pause ends; never after a crash.
func (c *candidate) whenRunning(fn func()) {
	switch {
	case c.crashed:
	case c.paused():
		c.deferred = append(c.deferred, fn)
	default:
		fn()
	}
}

// pause freezes the process for d: nothing it would do happens meanwhile.
func (c *candidate) pause(d time.Duration) {
	if c.crashed || c.paused() {
		return
	}
	c.pausedUntil = c.w.now + d
	c.w.logf("%s paused for %v", c.id, d)
	c.w.at(c.pausedUntil, func() {
		if c.crashed {
			return
		}
		c.w.logf("%s resumes", c.id)
		todo := c.deferred
		c.deferred = nil
		for _, fn := range todo {
			c.whenRunning(fn)
		}
	})
}

// start runs fn as the candidate's activity; then runs when it returns.
func (c *candidate) start(fn func(), then func()) {
	c.busy, c.then = true, then
	if c.activities == nil {
		c.activities = make(chan func())
		go c.work()
	}
	c.activities <- fn
	c.park()
}

// work runs the candidate's activities, one at a time, on one goroutine
// for the whole schedule (its stack, once grown, serves them all), until
// the world retires it.
func (c *candidate) work() {
	for fn := range c.activities {
		fn()
		c.finished <- struct{}{}
	}
}

// retire ends the goroutine that runs the activities, once the schedule
// is over and none is running.
func (c *candidate) retire() {
	if c.activities != nil {
		close(c.activities)
		c.activities = nil
	}
}

// park waits until the activity sends a store request or returns.
func (c *candidate) park() {
	c.el.touched = true // the activity runs meanwhile
	select {
	case req := <-c.calls:
		c.pending = req
		if c.crashed {
			c.answer(result{err: errCrashed})
			return
		}
		c.w.send(c, req)
	case sl := <-c.sleeps:
		c.sleeping = sl.done
		if c.crashed {
			c.endSleep()
			return
		}
		c.w.after(time.Duration(float64(sl.d)/c.clock.rate), func() {
			c.whenRunning(func() {
				if c.sleeping == sl.done {
					c.endSleep()
				}
			})
		})
	case <-c.finished:
		c.busy = false
		if !c.crashed {
			c.then()
		}
	}
}

// endSleep ends the activity's wait and lets it run until it blocks again.
func (c *candidate) endSleep() {
	done := c.sleeping
	c.sleeping = nil
	done <- c.clock.Now()
	c.park()
}

// answer hands the pending request its result and lets the activity run
// until it blocks again.
func (c *candidate) answer(r result) {
	req := c.pending
	c.pending = nil
	req.reply <- r
	c.park()
}

// expire ends bound t: f ends the context it bounds, and a request or a
// wait of the activity under that context ends with it, as it would in
// the process (the request may still reach the store: it was sent).
func (c *candidate) expire(t *bound) {
	if t.done {
		return
	}
	c.endBound(t)
	switch {
	case c.pending != nil && c.pending.ctx != nil && c.pending.ctx.Err() != nil:
		c.w.logf("%s's %s cut off by its bound", c.id, c.pending.op)
		c.answer(result{err: c.pending.ctx.Err()})
	case c.sleeping != nil:
		c.endSleep() // the wait ends with its context; the activity looks again
	}
}

// endBound runs bound t's function and forgets it.
func (c *candidate) endBound(t *bound) {
	t.done = true
	c.bounds = slices.DeleteFunc(c.bounds, (*bound).stopped)
	t.f()
}

// wake is the loop's timer firing: an attempt, unless one is running.
func (c *candidate) wake() {
	c.whenRunning(func() {
		if c.busy {
			c.wokeBusy = true
			return
		}
		c.attempt()
	})
}

func (c *candidate) attempt() {
	c.wokeBusy = false
	c.start(func() { c.nextWait = c.d.Attempt(background) }, func() {
		c.schedule(c.nextWait)
		if c.signalled {
			c.signalled = false
			c.signal()
		}
	})
}

// schedule sets the loop's timer to fire after d on the candidate's clock:
// after at least a nanosecond of the world's when d is not zero, so that a
// wait that a fast clock shrinks below one does not fire at the same
// instant again and again (an attempt that makes no request takes no time).
func (c *candidate) schedule(d time.Duration) {
	c.wakeGen++
	gen := c.wakeGen
	after := time.Duration(float64(d) / c.clock.rate)
	if d > 0 {
		after = max(after, 1)
	}
	c.w.after(after, func() {
		if gen == c.wakeGen {
			c.wake()
		}
	})
}

// signal is a change signal from the backend's watch, as Run handles it.
func (c *candidate) signal() {
	c.whenRunning(func() {
		if c.busy {
			c.signalled = true
			return
		}
		c.el.touched = true
		switch attemptNow, wait, reschedule := c.d.Signal(); {
		case attemptNow:
			c.wakeGen++
			c.attempt()
		case reschedule:
			c.schedule(wait)
		}
	})
}

// release is POST /leader/release, when the loop is between attempts.
func (c *candidate) release() bool {
	if c.crashed || c.paused() || c.busy {
		return false
	}
	c.w.logf("%s releases", c.id)
	c.start(func() { _, _ = c.e.Release(background) }, func() {})
	return true
}

// stop is SIGTERM: stop claiming and release, then the process is gone.
func (c *candidate) stop() bool {
	if c.crashed || c.paused() || c.busy {
		return false
	}
	c.w.logf("%s stops gracefully", c.id)
	c.stopping = true
	if c.w.rollout != nil && c.e.Status().Leader {
		c.w.rollout.leadersStopped++
	}
	c.wakeGen++
	c.start(func() { _ = c.d.Stop() }, func() { c.crashed = true })
	return true
}

// crash ends the process at once: whatever it was doing is abandoned (a
// request already on its way may still reach the store).
func (c *candidate) crash() {
	if c.crashed {
		return
	}
	c.crashed = true
	c.cancel()
	c.wakeGen++
	// The process is gone: whatever bounded its work has ended, and what
	// its abandoned activity does next ends at once.
	for len(c.bounds) > 0 {
		c.endBound(c.bounds[0])
	}
	for c.busy {
		switch {
		case c.pending != nil:
			c.answer(result{err: errCrashed})
		case c.sleeping != nil:
			c.endSleep()
		default:
			c.park()
		}
	}
}
