package election

import (
	"context"
	"errors"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// attempt reads the record and, where the rules allow, acquires or renews
// it. It reports whether this candidate holds the record afterwards. The
// caller holds opMu.
func (e *Elector) attempt(ctx context.Context) bool {
	start := e.cfg.Clock.Now()
	if held, ok := e.renewBlind(ctx, start); ok {
		return held
	}
	rec, version, err := e.cfg.Backend.Get(ctx)
	if errors.Is(err, backend.ErrNotFound) {
		return e.create(ctx, start)
	}
	if err != nil {
		e.failed("read", err)
		return false
	}
	next, ok := e.plan(rec, version, start)
	if !ok {
		return false
	}
	newVersion, err := e.cfg.Backend.Update(ctx, version, next)
	if err != nil {
		e.failed("update", err)
		return false
	}
	e.won(next, newVersion, start)
	return true
}

// renewBlind renews a record this candidate wrote last without reading it
// first: an Update conditional on the version it wrote, so the leader costs
// the store one request per renewal. It reports ok=false when a read is
// needed (not leading, or the record changed under it).
func (e *Elector) renewBlind(ctx context.Context, start time.Time) (held, ok bool) {
	e.mu.Lock()
	rec, version := e.observed, e.observedVersion
	mine := e.leading && !e.stopped && !e.holdingOffLocked(start) && rec.HolderIdentity == e.cfg.Identity &&
		rec.Transitions == e.token && version != ""
	e.mu.Unlock()
	if !mine {
		return false, false
	}
	rec.RenewTime = start
	rec.LeaseDurationSeconds = e.leaseSeconds()
	newVersion, err := e.cfg.Backend.Update(ctx, version, rec)
	switch {
	case err == nil:
		e.won(rec, newVersion, start)
		return true, true
	case errors.Is(err, backend.ErrConflict), errors.Is(err, backend.ErrNotFound):
		return false, false // someone else wrote: read, then decide
	default:
		e.failed("update", err)
		return false, true
	}
}

// create recreates a missing record with a token above any seen.
func (e *Elector) create(ctx context.Context, start time.Time) bool {
	e.mu.Lock()
	e.reachedStore = true
	if e.leading {
		e.stepDownLocked("the record disappeared")
	}
	if e.holdingOffLocked(start) || e.stopped {
		e.mu.Unlock()
		return false
	}
	rec := e.termRecord(start, e.highestToken+1)
	e.mu.Unlock()

	version, err := e.cfg.Backend.Create(ctx, rec)
	if err != nil {
		e.failed("create", err)
		return false
	}
	e.won(rec, version, start)
	return true
}

// plan records what was read and returns the record to write, or false
// when the rules forbid writing now.
func (e *Elector) plan(rec backend.Record, version backend.Version, now time.Time) (backend.Record, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reachedStore = true
	if version != e.observedVersion {
		// A read found a change no snapshot reported: poll until the
		// backend's watch shows it is keeping up again.
		e.observed, e.observedVersion, e.observedAt = rec, version, now
		e.pollFast = true
		e.notifyLocked()
	}
	e.highestToken = max(e.highestToken, rec.Transitions)
	mine := rec.HolderIdentity == e.cfg.Identity
	if e.leading && !mine {
		e.stepDownLocked("another candidate holds the record")
	}
	if e.stopped || e.holdingOffLocked(now) {
		return backend.Record{}, false
	}
	if !mine && rec.HolderIdentity != "" && now.Before(e.expiryLocked()) {
		return backend.Record{}, false
	}
	if mine && rec.Transitions >= 1 && rec.Transitions == e.highestToken {
		renewed := rec
		renewed.LeaseDurationSeconds = e.leaseSeconds()
		renewed.RenewTime = now
		if renewed.AcquireTime.IsZero() {
			renewed.AcquireTime = now
		}
		return renewed, true
	}
	// A new term: a takeover, an acquisition of a released record, or a
	// record of ours whose token fell below one seen before (edited by hand).
	return e.termRecord(now, e.highestToken+1), true
}

// expiryLocked is when the observed record may be taken over: its lease
// duration after this candidate first saw its current version.
func (e *Elector) expiryLocked() time.Time {
	d := time.Duration(e.observed.LeaseDurationSeconds) * time.Second
	if d <= 0 {
		d = e.cfg.LeaseDuration
	}
	return e.observedAt.Add(d)
}

func (e *Elector) termRecord(now time.Time, token int64) backend.Record {
	return backend.Record{
		HolderIdentity:       e.cfg.Identity,
		LeaseDurationSeconds: e.leaseSeconds(),
		AcquireTime:          now,
		RenewTime:            now,
		Transitions:          token,
	}
}

func (e *Elector) leaseSeconds() int32 { return int32(e.cfg.LeaseDuration / time.Second) }

func (e *Elector) holdingOffLocked(now time.Time) bool { return now.Before(e.holdOffUntil) }

// won records a successful write of rec, made by an attempt that started
// at start.
func (e *Elector) won(rec backend.Record, version backend.Version, start time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reachedStore = true
	e.observed, e.observedVersion, e.observedAt = rec, version, start
	e.highestToken = max(e.highestToken, rec.Transitions)
	// A Release or shutdown that began during this attempt wins: the record
	// names us, but we do not claim it, and the release that follows
	// clears it.
	if e.stopped || e.holdingOffLocked(start) {
		e.notifyLocked()
		return
	}
	newTerm := !e.leading || e.token != rec.Transitions
	e.leading, e.renewedAt, e.token = true, start, rec.Transitions
	if newTerm {
		e.log.Info("became leader", "token", rec.Transitions)
		e.cfg.Observer.LeadershipChanged(true, rec.Transitions)
	}
	e.notifyLocked()
}

func (e *Elector) failed(op string, err error) {
	e.mu.Lock()
	leading := e.leading
	e.mu.Unlock()
	if errors.Is(err, backend.ErrConflict) || errors.Is(err, backend.ErrAlreadyExists) {
		e.log.Debug("lost a race for the record", "op", op, "err", err)
	} else {
		e.log.Warn("store request failed", "op", op, "err", err)
	}
	if leading {
		e.cfg.Observer.RenewFailed(err)
	}
}

// stepDownLocked ends this candidate's term.
func (e *Elector) stepDownLocked(reason string) {
	if !e.leading {
		return
	}
	e.leading = false
	e.log.Info("stopped leading", "token", e.token, "reason", reason)
	e.cfg.Observer.LeadershipChanged(false, e.token)
	e.notifyLocked()
}
