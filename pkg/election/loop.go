package election

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Run takes part in the election until ctx ends. Losing leadership does not
// end it: the candidate steps down and contends again. When ctx ends, the
// candidate stops claiming at once and, with ReleaseOnCancel, releases the
// record if it holds it. Run returns nil after a clean stop.
func (e *Elector) Run(ctx context.Context) error {
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	changes := e.cfg.Backend.Watch(watchCtx)
	e.log.Info("joining the election",
		"leaseDuration", e.cfg.LeaseDuration, "renewDeadline", e.cfg.RenewDeadline, "retryPeriod", e.cfg.RetryPeriod)
	for {
		e.step(ctx)
		if !e.wait(ctx, changes) {
			e.shutdown()
			return nil
		}
	}
}

// wait blocks until the next attempt is due, and reports false when ctx
// ended. A change signal wakes a standby early: another writer may have
// released or taken the record. A leader's own renewals also signal, so a
// leader keeps its schedule.
func (e *Elector) wait(ctx context.Context, changes <-chan struct{}) bool {
	timer := e.cfg.Clock.NewTimer(e.nextWait())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C():
			return true
		case _, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			if e.Status().Leader {
				continue
			}
			if !e.absorbSnapshot() {
				return true
			}
			timer.Reset(e.nextWait())
		}
	}
}

// step makes one attempt, bounded in time, and updates the loop's state.
func (e *Elector) step(ctx context.Context) {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	attemptCtx, cancel := context.WithTimeout(ctx, e.attemptTimeout())
	e.attempt(attemptCtx)
	cancel()

	now := e.cfg.Clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.progressAt = now
	if e.leading && !e.claimingLocked(now) && !e.stopped {
		e.stepDownLocked("could not renew within the renew deadline")
	}
}

// attemptTimeout bounds one attempt: a leader may use what is left of its
// renew deadline, a standby the whole deadline.
func (e *Elector) attemptTimeout() time.Duration {
	s := e.Status()
	if s.Leader {
		if left := s.ValidUntil.Sub(e.cfg.Clock.Now()); left > 0 {
			return left
		}
	}
	return e.cfg.RenewDeadline
}

// nextWait is how long to wait before the next attempt: RetryPeriod for a
// leader (none if its claim ends sooner than that). A standby that learns of changes from snapshots waits until the
// record it watches would expire; otherwise it polls every RetryPeriod with
// jitter, cut short by that expiry. Both are cut short by the end of a
// hold-off.
func (e *Elector) nextWait() time.Duration {
	if s := e.Status(); s.Leader {
		// A renewal that waited long on the store left a short claim:
		// renew again at once rather than let it lapse first.
		if s.ValidUntil.Sub(e.cfg.Clock.Now()) < e.cfg.RetryPeriod {
			return 0
		}
		return e.cfg.RetryPeriod
	}
	wait := time.Duration(float64(e.cfg.RetryPeriod) * (1 + (JitterFactor-1)*rand.Float64()))
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.observed.HolderIdentity != "" && e.observed.HolderIdentity != e.cfg.Identity {
		if left := e.expiryLocked().Sub(now); left > 0 && (left < wait || !e.pollFast) {
			wait = left
		}
	}
	if left := e.holdOffUntil.Sub(now); left > 0 && left < wait {
		wait = left
	}
	return wait
}

// absorbSnapshot reads the backend's snapshot after a change signal and, if
// it shows a new version, records it as observed now, without a request.
// It reports true when nothing needs doing before the next scheduled
// attempt, false when an attempt should run now (no snapshot available, or
// the record can be taken: released, ours, or expired).
func (e *Elector) absorbSnapshot() bool {
	snap, ok := e.cfg.Backend.(backend.Snapshotter)
	if !ok {
		return false
	}
	rec, version, ok := snap.Snapshot()
	if !ok {
		return false
	}
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if version != e.observedVersion {
		e.observed, e.observedVersion, e.observedAt = rec, version, now
		e.highestToken = max(e.highestToken, rec.Transitions)
		e.pollFast = false
		e.notifyLocked()
	}
	holder := rec.HolderIdentity
	takeable := holder == "" || holder == e.cfg.Identity || !now.Before(e.expiryLocked())
	return !takeable || e.stopped || e.holdingOffLocked(now)
}
