package election

import (
	"context"
	"time"
)

// Driver takes an Elector through its loop one step at a time, for a
// caller that keeps time and delivers the backend's change signals itself,
// such as a deterministic simulator. Run is the usual driver: it takes the
// same steps on the Clock's timers and the backend's Watch. Use one or the
// other, never both, and call a Driver's methods from one goroutine.
type Driver struct{ e *Elector }

// Driver returns a Driver for e.
func (e *Elector) Driver() Driver { return Driver{e} }

// Attempt makes one attempt, bounded in time as in Run, and
// returns how long Run would wait before the next one.
func (d Driver) Attempt(ctx context.Context) time.Duration {
	d.e.step(ctx)
	return d.e.nextWait()
}

// Signal handles one change signal from the backend as Run does. It
// reports whether an attempt is due now; if not, and reschedule is true,
// the next attempt is due after wait instead of when it was due before.
//
// A leader keeps its renewal schedule unless the record may have changed
// under it: then the attempt due now only reads the record, and writes
// (or steps down) only if it is no longer the version the leader wrote.
func (d Driver) Signal() (attemptNow bool, wait time.Duration, reschedule bool) {
	if d.e.Status().Leader {
		return d.e.checkAfterSignal(), 0, false
	}
	if !d.e.absorbSnapshot() {
		return true, 0, false
	}
	return false, d.e.nextWait(), true
}

// Stop ends the election as Run does when its context ends: the candidate
// stops claiming and, with ReleaseOnCancel, releases the record. It
// returns what Run would.
func (d Driver) Stop() error { return d.e.shutdown() }
