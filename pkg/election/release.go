package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// ErrNotLeader is returned by Release when this candidate neither leads
// nor is named as holder by the record (it has nothing to release), and by
// Handoff when it does not lead (it has nothing to hand off); nothing was
// changed either way.
var ErrNotLeader = errors.New("not the leader")

// Release steps down at once and keeps this candidate out of the election
// for ReleaseHoldOff. If the record names this candidate, it is rewritten
// with an empty holder (token kept) so a standby can take over without
// waiting for expiry. The candidate stops claiming before the write, so
// Status reports "not leader" even if the write fails. It returns the
// status after the release.
//
// After Run has ended, a record this candidate created but did not claim
// yet is released too, once its claim could begin, if ctx lasts that long
// (releasePendingClaim): the release on shutdown of a sidecar that takes
// its mark off the Pod first.
//
// A candidate that does not lead and is not the record's holder (a
// standby) is left as it is: Release returns its status and an error
// wrapping ErrNotLeader that names the holder, and no hold-off begins, so
// the standby still takes over at once when the leader releases.
func (e *Elector) Release(ctx context.Context) (Status, error) {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	if !e.leading && e.view.holder() != e.cfg.Identity {
		holder := e.view.holder()
		e.mu.Unlock()
		return e.Status(), fmt.Errorf("%w: nothing to release (the record names %q)", ErrNotLeader, holder)
	}
	e.holdOffUntil = now.Add(e.cfg.ReleaseHoldOff)
	e.stepDownLocked(TermReleased, "released on request")
	e.notifyLocked()
	e.unlockAndNotify()

	e.opMu.Lock()
	defer e.opMu.Unlock()
	err := e.releaseRecord(ctx)
	e.mu.Lock()
	stopped := e.stopped
	e.mu.Unlock()
	if err == nil && stopped {
		err = e.releasePendingClaim(ctx)
	}
	return e.Status(), err
}

// SitOut takes this candidate out of the election until Rejoin, for a
// reason such as "the application is unhealthy": it stops claiming at
// once, releases the record if it names it (so a standby takes over
// within the store's change signal, not after the lease), and makes no
// attempt to lead while it sits out. It keeps following the record, so
// Status still names the holder. Sitting out twice is the same as once.
// It returns the status after the release, and the release's error, if
// any (the candidate has stopped claiming regardless).
func (e *Elector) SitOut(ctx context.Context, reason string) (Status, error) {
	e.mu.Lock()
	already := e.sittingOut
	e.sittingOut = true
	e.stepDownLocked(TermReleased, "sitting out: "+reason)
	if !already {
		e.log.Info("sitting out of the election", "reason", reason)
	}
	e.notifyLocked()
	e.unlockAndNotify()

	e.opMu.Lock()
	defer e.opMu.Unlock()
	err := e.releaseRecord(ctx)
	return e.Status(), err
}

// Rejoin ends SitOut: the candidate contends again at once (Run makes an
// attempt without waiting for its next scheduled one). Rejoining a
// candidate that does not sit out does nothing.
func (e *Elector) Rejoin() {
	e.mu.Lock()
	if !e.sittingOut {
		e.mu.Unlock()
		return
	}
	e.sittingOut = false
	e.log.Info("rejoining the election")
	e.notifyLocked()
	e.unlockAndNotify()
	select {
	case e.wake <- struct{}{}:
	default: // an attempt is due already
	}
}

// SittingOut reports whether the candidate sits out (see SitOut).
func (e *Elector) SittingOut() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sittingOut
}

// releaseRecord writes an empty holder over a record that names this
// candidate. On a version conflict it reads again once: the conflict may be
// its own renewal that raced the release. The caller holds opMu and has
// already stopped claiming.
//
// Only a version this candidate wrote and claimed is released: a release
// is taken at once, so releasing a record created but not yet claimed
// (decide's deferClaim), or one naming this candidate that it does not
// know it wrote, would let a standby lead while the holder of a deleted
// record may still claim. Those are waited out like an expiry. A renewal
// whose answer was lost (a shutdown cancelled it, it timed out) is known
// once the read after the conflict shows the very record it sent
// (observeLocked): that version is released. So is a standby's accept of
// this candidate's offer on the term it claimed (acceptOnOwnTermLocked):
// a hand-off cut short (its claim ran out, or the stop's bound, while the
// accept was landing unseen) leaves it, and the standby that accepted
// waits for a transfer that will not come; released, it leads at once.
func (e *Elector) releaseRecord(ctx context.Context) error {
	for range 2 {
		e.mu.Lock()
		v := e.view
		ours := v.version == e.writtenVersion && v.version != e.deferredVersion || e.acceptOnOwnTermLocked(v.rec)
		e.mu.Unlock()
		if v.holder() != e.cfg.Identity || !ours {
			return nil
		}
		released := e.releaseWritten(v.rec.Transitions)
		written, err := e.cfg.Backend.Update(ctx, v.version, released)
		if err == nil {
			e.observe(true, released, written)
			e.log.Info("released the lease", "token", v.rec.Transitions)
			return nil
		}
		if !errors.Is(err, backend.ErrConflict) && !errors.Is(err, backend.ErrNotFound) {
			return fmt.Errorf("release: %w", err)
		}
		fresh, freshVersion, err := e.cfg.Backend.Get(ctx)
		if err != nil && !errors.Is(err, backend.ErrNotFound) {
			return fmt.Errorf("release: %w", err)
		}
		e.observe(err == nil, fresh, freshVersion)
	}
	return fmt.Errorf("release: the record kept changing: %w", backend.ErrConflict)
}

// releasePendingClaim releases a record this candidate created but does
// not claim yet (decide's deferClaim), once its claim may begin: from then
// on no holder of an earlier record can claim, just as when the candidate
// itself would begin to, so the release may be taken at once like any
// other. Left as it is, a record whose creator stopped would be waited out
// for another lease from whenever the next candidate first saw it: a Pod
// replaced while the first claim on a new Lease is pending (an upgrade
// right after an install) would leave the election leaderless for up to
// two leases. It waits until ctx ends at the latest, and writes only over
// the version it created. The caller holds opMu and no longer claims or
// attempts.
func (e *Elector) releasePendingClaim(ctx context.Context) error {
	e.mu.Lock()
	v := e.view
	pending := v.present && v.version == e.deferredVersion && v.version == e.writtenVersion && v.holder() == e.cfg.Identity
	from := e.observationLocked(e.cfg.Clock.Now()).expiry()
	e.mu.Unlock()
	if !pending {
		return nil
	}
	if wait := from.Sub(e.cfg.Clock.Now()); wait > 0 {
		e.log.Info("stopping before the claim on the record it created begins: releasing it once that claim could begin",
			"token", v.rec.Transitions, "claimFrom", from)
		select {
		case <-ctx.Done():
		case <-e.cfg.Clock.After(wait):
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("release of the record created at token %d before its claim began: %w", v.rec.Transitions, err)
		}
	}
	released := e.releaseWritten(v.rec.Transitions)
	written, err := e.cfg.Backend.Update(ctx, v.version, released)
	switch {
	case err == nil:
		e.observe(true, released, written)
		e.log.Info("released the record it created, never having claimed it", "token", v.rec.Transitions)
		return nil
	case errors.Is(err, backend.ErrConflict) || errors.Is(err, backend.ErrNotFound):
		return nil // someone else's record now: the rules already cover it
	default:
		return fmt.Errorf("release of the record created at token %d: %w", v.rec.Transitions, err)
	}
}

// releaseWritten is the release this candidate writes at token: the
// release shape, which after Run ended (a stop) carries with
// AwaitReplacement a reserve marker that leaves it for that long to this
// candidate's replacement or to another revision.
func (e *Elector) releaseWritten(token int64) backend.Record {
	released := ReleaseShape(token, e.cfg.Clock.Now())
	e.mu.Lock()
	stopped := e.stopped
	e.mu.Unlock()
	if stopped && e.cfg.AwaitReplacement > 0 {
		released.Handoff = backend.Handoff{Phase: backend.HandoffReserve, From: e.cfg.Identity,
			To: IdentityPrefix(e.cfg.Identity), Token: token, Revision: e.cfg.Revision, Wait: e.cfg.AwaitReplacement}
	}
	return released
}

// acceptOnOwnTermLocked reports whether rec is the term this candidate
// last claimed (its holder, its token) carrying a standby's accept of this
// candidate's own offer: a version the standby wrote over one this
// candidate wrote and claimed, so the term is this candidate's to end.
// Only an offer made while claiming is accepted, and a term's token is
// never handed out twice, so no other term can look like it.
func (e *Elector) acceptOnOwnTermLocked(rec backend.Record) bool {
	me, a := e.cfg.Identity, rec.Handoff
	return e.token > 0 && rec.HolderIdentity == me && rec.Transitions == e.token &&
		a.Phase == backend.HandoffAccept && a.From == me && a.Token == e.token && a.To != "" && a.To != me
}

// ReleaseShape is the record a release writes, here, in client-go and in
// sidecar reset: no holder, a lease of one second, acquire time equal to
// renew time, the token kept. It is the one record a candidate takes over
// at once (see isRelease).
func ReleaseShape(token int64, now time.Time) backend.Record {
	return backend.Record{LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now, Transitions: token}
}

// IsReleaseShape reports whether rec is in the shape ReleaseShape gives:
// the one record a candidate takes at once, without waiting it out.
func IsReleaseShape(rec backend.Record) bool { return isRelease(rec) }
