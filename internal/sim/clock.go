package sim

import (
	"slices"
	"time"

	"k8s.io/utils/clock"
)

// epoch is virtual time zero.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// driftingClock is one candidate's clock: it reads the world's true time
// scaled by rate since the candidate started, so two candidates' clocks
// advance at different speeds. It has no monotonic reading, so the
// elector's monotonic and wall-clock checks see the same time.
type driftingClock struct {
	w       *world
	rate    float64
	started time.Duration // true time when the candidate started
	sleeps  chan<- sleep  // the candidate's
	c       *candidate    // whose bounds it keeps (AfterFunc)
}

func (c *driftingClock) Now() time.Time {
	elapsed := c.w.now - c.started
	return epoch.Add(c.started + time.Duration(float64(elapsed)*c.rate))
}

func (c *driftingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// sleep is a wait of an activity on its candidate's clock, handed to the
// world, which closes done after d of the candidate's time.
type sleep struct {
	d    time.Duration
	done chan time.Time
}

// After hands the wait to the world through the candidate's activity, as
// a store request is: the world schedules its end in virtual time. Only an
// activity (a hand-off polling for an answer) waits this way.
func (c *driftingClock) After(d time.Duration) <-chan time.Time {
	done := make(chan time.Time, 1)
	c.sleeps <- sleep{d: d, done: done}
	return done
}

// AfterFunc keeps a bound the elector puts on its own work (an attempt,
// a hand-off, the release on shutdown: election's within): the world runs
// f after d of the candidate's time, on its own goroutine, and then cuts
// off the request or the wait the activity is in if f ended its context,
// as a real client's request ends with its context. A bound kept while
// the process is paused ends when it resumes; once it has crashed, at
// once (crash ends those running then).
func (c *driftingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &bound{f: f}
	if c.c.crashed {
		t.done = true
		f()
		return t
	}
	cand := c.c
	cand.bounds = append(slices.DeleteFunc(cand.bounds, (*bound).stopped), t)
	// At least a nanosecond of the world's when d is not zero, as a
	// timer of the loop's (candidate.schedule): an attempt cut off by its
	// bound is retried at once, and its next bound may round to nothing.
	after := time.Duration(float64(d) / c.rate)
	if d > 0 {
		after = max(after, 1)
	}
	c.w.atBound(c.w.now+after, t, func() {
		cand.whenRunning(func() { cand.expire(t) })
	})
	return t
}

// bound is a timer of AfterFunc. done is set once it fired or was
// stopped: the world then skips its event, which leaves a schedule whose
// bounds never expire exactly as it played before bounds were kept.
type bound struct {
	f    func()
	done bool
}

func (t *bound) C() <-chan time.Time { return nil }

func (t *bound) stopped() bool { return t.done }

func (t *bound) Stop() bool {
	was := !t.done
	t.done = true
	return was
}

func (t *bound) Reset(time.Duration) bool { panic("sim: a bound is never reset") }

// The loop's own waits are the world's (election.Driver): these timers
// never fire.
func (c *driftingClock) NewTimer(time.Duration) clock.Timer  { return idleTimer{} }
func (c *driftingClock) Sleep(time.Duration)                 {}
func (c *driftingClock) Tick(time.Duration) <-chan time.Time { return nil }

type idleTimer struct{}

func (idleTimer) C() <-chan time.Time      { return nil }
func (idleTimer) Stop() bool               { return true }
func (idleTimer) Reset(time.Duration) bool { return true }

var _ clock.WithDelayedExecution = (*driftingClock)(nil)
