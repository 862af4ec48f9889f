package sim

import (
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

// The loop's own waits are the world's (election.Driver): these timers
// never fire.
func (c *driftingClock) NewTimer(time.Duration) clock.Timer  { return idleTimer{} }
func (c *driftingClock) Sleep(time.Duration)                 {}
func (c *driftingClock) Tick(time.Duration) <-chan time.Time { return nil }

type idleTimer struct{}

func (idleTimer) C() <-chan time.Time      { return nil }
func (idleTimer) Stop() bool               { return true }
func (idleTimer) Reset(time.Duration) bool { return true }

var _ clock.Clock = (*driftingClock)(nil)
