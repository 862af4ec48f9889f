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
}

func (c *driftingClock) Now() time.Time {
	elapsed := c.w.now - c.started
	return epoch.Add(c.started + time.Duration(float64(elapsed)*c.rate))
}

func (c *driftingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// The simulator drives every wait itself (election.Driver); the elector
// asks its clock only for the time. These timers never fire.
func (c *driftingClock) After(time.Duration) <-chan time.Time { return nil }
func (c *driftingClock) NewTimer(time.Duration) clock.Timer   { return idleTimer{} }
func (c *driftingClock) Sleep(time.Duration)                  {}
func (c *driftingClock) Tick(time.Duration) <-chan time.Time  { return nil }

type idleTimer struct{}

func (idleTimer) C() <-chan time.Time      { return nil }
func (idleTimer) Stop() bool               { return true }
func (idleTimer) Reset(time.Duration) bool { return true }

var _ clock.Clock = (*driftingClock)(nil)
