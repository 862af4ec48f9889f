package election

import (
	"context"
	"errors"
	"fmt"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Release steps down at once and keeps this candidate out of the election
// for ReleaseHoldOff. If the record names this candidate, it is rewritten
// with an empty holder (token kept) so a standby can take over without
// waiting for expiry. The candidate stops claiming before the write, so
// Status reports "not leader" even if the write fails. It returns the
// status after the release.
func (e *Elector) Release(ctx context.Context) (Status, error) {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	e.holdOffUntil = now.Add(e.cfg.ReleaseHoldOff)
	e.stepDownLocked("released on request")
	e.notifyLocked()
	e.mu.Unlock()

	e.opMu.Lock()
	defer e.opMu.Unlock()
	err := e.releaseRecord(ctx)
	return e.Status(), err
}

// shutdown ends Run: no claim from now on, and a release if configured.
func (e *Elector) shutdown() {
	e.mu.Lock()
	e.stopped = true
	e.stepDownLocked("shutting down")
	e.notifyLocked()
	e.mu.Unlock()
	if !e.cfg.ReleaseOnCancel {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.RenewDeadline)
	defer cancel()
	e.opMu.Lock()
	defer e.opMu.Unlock()
	if err := e.releaseRecord(ctx); err != nil {
		e.log.Warn("could not release the lease on shutdown; standbys will wait for it to expire", "err", err)
	}
}

// releaseRecord writes an empty holder over a record that names this
// candidate. On a version conflict it reads again once: the conflict may be
// its own renewal that raced the release. The caller holds opMu and has
// already stopped claiming.
func (e *Elector) releaseRecord(ctx context.Context) error {
	for range 2 {
		e.mu.Lock()
		rec, version := e.observed, e.observedVersion
		e.mu.Unlock()
		if rec.HolderIdentity != e.cfg.Identity {
			return nil
		}
		now := e.cfg.Clock.Now()
		released := backend.Record{
			LeaseDurationSeconds: 1,
			AcquireTime:          now,
			RenewTime:            now,
			Transitions:          rec.Transitions,
		}
		newVersion, err := e.cfg.Backend.Update(ctx, version, released)
		if err == nil {
			e.mu.Lock()
			e.observed, e.observedVersion, e.observedAt = released, newVersion, now
			e.notifyLocked()
			e.mu.Unlock()
			e.log.Info("released the lease", "token", rec.Transitions)
			return nil
		}
		if !errors.Is(err, backend.ErrConflict) {
			return fmt.Errorf("release: %w", err)
		}
		fresh, freshVersion, err := e.cfg.Backend.Get(ctx)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		e.mu.Lock()
		e.observed, e.observedVersion, e.observedAt = fresh, freshVersion, now
		e.mu.Unlock()
	}
	return fmt.Errorf("release: the record kept changing: %w", backend.ErrConflict)
}
