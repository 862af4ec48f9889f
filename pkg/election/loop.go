package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Run takes part in the election until ctx ends. Losing leadership does not
// end it: the candidate steps down and contends again. When ctx ends, the
// candidate stops claiming at once and, with ReleaseOnCancel, releases the
// record if it holds it. Run returns nil after a clean stop, and an error
// wrapping backend.ErrStoreLost when the backend lost its store (the
// candidate stopped claiming the moment the loss was noticed).
func (e *Elector) Run(ctx context.Context) error {
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	changes := e.cfg.Backend.Watch(watchCtx)
	if n, ok := e.cfg.Backend.(backend.LossNotifier); ok {
		go e.watchForLoss(watchCtx, n.Lost())
	}
	e.log.Info("joining the election",
		"leaseDuration", e.cfg.LeaseDuration, "renewDeadline", e.cfg.RenewDeadline,
		"renewInterval", e.cfg.RenewInterval, "retryPeriod", e.cfg.RetryPeriod)
	d := e.Driver()
	timer := e.cfg.Clock.NewTimer(d.Attempt(ctx))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return d.Stop()
		case <-e.lostCh:
			return d.Stop()
		case <-timer.C():
			timer.Reset(d.Attempt(ctx))
		case <-e.wake:
			timer.Stop()
			timer.Reset(d.Attempt(ctx))
		case _, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			switch attemptNow, wait, reschedule := d.Signal(); {
			case attemptNow:
				timer.Stop()
				timer.Reset(d.Attempt(ctx))
			case reschedule:
				timer.Stop()
				timer.Reset(wait)
			}
		}
	}
}

// watchForLoss stops the candidate as soon as lost is closed, without
// waiting for the loop.
func (e *Elector) watchForLoss(ctx context.Context, lost <-chan struct{}) {
	select {
	case <-ctx.Done():
	case <-lost:
		e.mu.Lock()
		e.loseLocked(backend.ErrStoreLost)
		e.unlockAndNotify()
	}
}

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

// step makes one attempt, bounded in time, and updates the loop's state.
func (e *Elector) step(ctx context.Context) {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	defer e.busy()()
	e.mu.Lock()
	e.attemptFailed = false
	e.attemptStarted = e.cfg.Clock.Now()
	e.mu.Unlock()
	attemptCtx, cancel := e.within(ctx, e.attemptTimeout())
	e.attempt(attemptCtx)
	cutOff := errors.Is(attemptCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()

	now := e.cfg.Clock.Now()
	e.mu.Lock()
	defer e.unlockAndNotify()
	e.attemptCutOff = cutOff && e.attemptFailed
	if e.leading && !e.claimingLocked(now) && !e.stopped {
		e.stepDownLocked(TermLost, "could not renew within the renew deadline")
	}
}

// attemptTimeout bounds one attempt: a leader may use what is left of its
// claim but for a reserve of half a retry period (at most half of what is
// left), so a request that hangs until it is cut off leaves room for a
// retry on fresh connections; but never less than one and a half times
// what its last successful write took (at most what is left), so a store
// that answers slowly but surely, within the claim, is not cut off just
// before its answer. A standby may use the whole renew deadline.
func (e *Elector) attemptTimeout() time.Duration {
	s := e.Status()
	if s.Leader {
		if left := s.ValidUntil.Sub(e.cfg.Clock.Now()); left > 0 {
			e.mu.Lock()
			took := e.lastWriteTook
			e.mu.Unlock()
			return max(left-min(left/2, e.cfg.RetryPeriod/2), min(left, took*3/2))
		}
	}
	return e.cfg.RenewDeadline
}

// nextWait is how long to wait before the next attempt. A leader renews
// RenewInterval after the start of its last successful renewal (at once if
// that renewal took longer); after a failed request the next attempt
// starts a jittered RetryPeriod after the start of the failed one (at once
// if that attempt took longer, as one cut off by its timeout does). A
// standby that learns of changes from snapshots waits until the rules may
// next allow a write (the record's expiry, the end of a hold-off);
// otherwise it polls every RetryPeriod with jitter, cut short by that
// instant.
func (e *Elector) nextWait() time.Duration {
	now := e.cfg.Clock.Now()
	poll := jittered(e.cfg.RetryPeriod, e.cfg.Jitter())
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.readAgainNow {
		// A leader's write lost a race: whoever won may have ended its
		// claim, so it reads again at once (once) instead of claiming on
		// for a retry period.
		e.readAgainNow = false
		return 0
	}
	if e.attemptFailed && e.attemptCutOff && e.claimingLocked(now) {
		// A try cut off by its bound hung: the next one, on fresh
		// connections, starts at once while the claim lasts.
		return 0
	}
	if e.attemptFailed {
		return max(0, e.attemptStarted.Add(poll).Sub(now))
	}
	if e.claimingLocked(now) {
		return max(0, e.renewedAt.Add(e.cfg.RenewInterval).Sub(now))
	}
	if e.sittingOut {
		// Nothing to write until Rejoin, which wakes Run; the record's
		// changes still arrive by the watch.
		return e.cfg.LeaseDuration
	}
	a := decide(e.observationLocked(now), now)
	if a.kind != wait || a.until.IsZero() {
		return poll
	}
	left := a.until.Sub(now)
	if left > 0 && (left < poll || !e.pollFast || now.Before(e.holdOffUntil)) {
		if !e.pollFast && e.view.present {
			// The watch keeps the view current: when the wait ends, the
			// attempt decides on the snapshot if it still shows this
			// version (readForAttempt), as on a release.
			e.acquireOn = e.view.version
		}
		return left
	}
	return poll
}

// checkAfterSignal handles a change signal on a leader. A snapshot that
// shows the version the leader wrote last needs nothing; otherwise (no
// snapshot, or another version) it reports that a check is due now: the
// next attempt reads the record before the renewal is due, so a record
// deleted, replaced or taken over under the leader ends its claim within
// the change signal's latency instead of at its next renewal.
func (e *Elector) checkAfterSignal() bool {
	if !e.opMu.TryLock() {
		// A hand-off or release is in progress: it reads and writes the
		// record itself, and the loop must not wait for it.
		return false
	}
	e.opMu.Unlock()
	_, version, ok := e.snapshot()
	e.mu.Lock()
	defer e.mu.Unlock()
	if ok && version == e.writtenVersion {
		return false
	}
	e.checkDue = true
	return true
}

// absorbSnapshot reads the backend's snapshot after a change signal and, if
// it shows a new version, records it as observed now, without a request.
// It reports true when nothing needs doing before the next scheduled
// attempt, false when an attempt should run now (no snapshot available, or
// the rules allow a write).
func (e *Elector) absorbSnapshot() bool {
	snap, ok := e.cfg.Backend.(backend.Snapshotter)
	if !ok {
		return false
	}
	defer e.busy()()
	rec, version, ok := snap.Snapshot()
	if !ok {
		return false
	}
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	defer e.unlockAndNotify()
	if e.observeLocked(true, rec, version, now) {
		e.pollFast = false
	}
	a := decide(e.observationLocked(now), now)
	e.acquireOn = ""
	if a.kind == acquire {
		e.acquireOn = version
	}
	return a.kind == wait
}

// shutdown ends Run: no claim from now on, and a release if configured
// (not after the store was lost: the record there is no one's concern):
// a hand-off first with HandoffOnStop, none with AwaitReplacement, whose
// release carries a reserve marker (releaseWritten). With either, a
// record it created and would have claimed later is released too, once
// that claim could begin (releasePendingClaim).
func (e *Elector) shutdown() error {
	if e.cfg.ReleaseOnCancel && e.cfg.HandoffOnStop && e.cfg.AwaitReplacement == 0 {
		e.handOffOnStop()
	}
	e.mu.Lock()
	e.stopped = true
	why := TermStopped
	if e.cfg.ReleaseOnCancel && !e.lost {
		why = TermReleased
	}
	e.stepDownLocked(why, "shutting down")
	e.notifyLocked()
	lost := e.lost
	e.unlockAndNotify()
	if lost {
		return lostError()
	}
	if !e.cfg.ReleaseOnCancel {
		return nil
	}
	ctx, cancel := e.within(context.Background(), e.cfg.RenewDeadline)
	defer cancel()
	e.opMu.Lock()
	defer e.opMu.Unlock()
	if err := e.releaseRecord(ctx); err != nil {
		e.log.Warn("could not release the lease on shutdown; standbys will wait for it to expire", "err", err)
	}
	if !e.cfg.HandoffOnStop && e.cfg.AwaitReplacement == 0 {
		return nil
	}
	pending, cancelPending := e.within(context.Background(), e.cfg.LeaseDuration+e.cfg.RenewDeadline)
	defer cancelPending()
	if err := e.releasePendingClaim(pending); err != nil {
		e.log.Warn("could not release the record it created on shutdown; standbys will wait for it to expire", "err", err)
	}
	return nil
}

// handOffOnStop offers leadership to anyone, a candidate of another
// revision first (Config.HandoffOnStop), if this candidate still leads:
// the release that follows then finds the record no longer its own.
// Without a taker it leads on until the release.
func (e *Elector) handOffOnStop() {
	ctx, cancel := e.within(context.Background(), e.cfg.RenewDeadline)
	defer cancel()
	status, err := e.Handoff(ctx, "")
	switch {
	case err == nil:
		e.log.Info("handed leadership off on shutdown", "to", status.Holder, "revision", e.cfg.Revision)
	case errors.Is(err, ErrNotLeader):
	default:
		e.log.Info("no candidate took leadership on shutdown; releasing it", "reason", err)
	}
}

// lostError is what Run returns after the store was lost.
func lostError() error {
	return fmt.Errorf("election: %w", backend.ErrStoreLost)
}
