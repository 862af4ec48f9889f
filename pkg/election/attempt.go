package election

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// attempt reads the record and, where the rules allow, acquires or renews
// it. It reports whether this candidate holds the record afterwards. The
// caller holds opMu.
func (e *Elector) attempt(ctx context.Context) bool {
	start := e.cfg.Clock.Now()
	check, renewalDue := e.takeCheck(start)
	if !check {
		if held, ok := e.renewBlind(ctx, start); ok {
			return held
		}
	}
	readCtx := ctx
	if check {
		// A check must not delay the renewal: it gives up when that is due.
		var cancel context.CancelFunc
		readCtx, cancel = e.within(ctx, renewalDue.Sub(start))
		defer cancel()
	}
	rec, version, err := e.readForAttempt(readCtx, check)
	seen := e.cfg.Clock.Now() // expiry counts from the answer, not the question
	present := err == nil
	if check && e.unchangedSinceWritten(present, version, err) {
		return true
	}
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		e.failed("read", err)
		return false
	}
	a, write := e.decideAfterRead(present, errors.Is(err, backend.ErrNeverCreated), rec, version, seen)
	var written backend.Version
	sent := e.cfg.Clock.Now()
	switch a.kind {
	case renew, acquire:
		written, err = e.cfg.Backend.Update(ctx, version, write)
		if a.kind == renew {
			e.rememberUnanswered(write, err)
		}
	case recreate:
		if f, ok := e.cfg.Backend.(backend.FirstCreator); ok && a.firstStart {
			written, err = f.CreateFirst(ctx, write)
		} else {
			written, err = e.cfg.Backend.Create(ctx, write)
		}
	case accept:
		written, err = e.cfg.Backend.Update(ctx, version, write)
		e.acceptSent(write, written, err, start)
		return false
	case releaseTransfer:
		written, err = e.cfg.Backend.Update(ctx, version, write)
		if err != nil {
			e.failed(a.kind.String(), err)
			return false
		}
		e.observe(true, write, written)
		e.log.Info("released a hand-off it may no longer take", "token", write.Transitions)
		return false
	default:
		return false
	}
	if err != nil {
		e.failed(a.kind.String(), err)
		return false
	}
	// A first start's create answered after the claim it would give has
	// lapsed may have landed long after the candidate looked, after a
	// deletion under a holder that still claims: claimed later, as a
	// recreated record is.
	lapsed := !e.cfg.Clock.Now().Before(start.Add(e.cfg.RenewDeadline))
	if a.deferClaim || a.firstStart && lapsed {
		e.recreatedUnclaimed(write, written)
		return false
	}
	e.won(write, written, start, sent)
	return true
}

// readForAttempt returns the record an attempt decides on. For a standby
// whose last wait was on a snapshot (a release seen by the watch:
// absorbSnapshot; a record it waited on to expire: nextWait), while that
// is still the snapshot the watch saw last, it is the snapshot, without a
// request; otherwise it is what a Get answers. The snapshot saves a
// hand-off and a fail-over a round trip to the store and is as safe as a
// read: the rules are applied to it again now, on the view that counts
// the record's age from when this candidate first saw that version (a
// read of the same version would not restart it either), and the write
// is a compare-and-swap on its version, so a snapshot the store has moved
// past costs a conflict, after which the next attempt reads.
func (e *Elector) readForAttempt(ctx context.Context, check bool) (backend.Record, backend.Version, error) {
	e.mu.Lock()
	on := e.acquireOn
	e.acquireOn = ""
	e.mu.Unlock()
	if on != "" && !check {
		if rec, version, ok := e.snapshot(); ok && version == on {
			return rec, version, nil
		}
	}
	return e.cfg.Backend.Get(ctx)
}

// takeCheck reports whether this attempt is a leader's check after a
// change signal (checkAfterSignal), made before its renewal is due, and
// when that is. A check due when the renewal is due too is a renewal.
func (e *Elector) takeCheck(start time.Time) (check bool, renewalDue time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	asked := e.checkDue
	e.checkDue = false
	renewalDue = e.renewedAt.Add(e.cfg.RenewInterval)
	return asked && e.claimingLocked(start) && start.Before(renewalDue), renewalDue
}

// renewBlind renews a record this candidate wrote last without reading it
// first: an Update conditional on the version it wrote, so the leader costs
// the store one request per renewal, and a leader whose claim lapsed on a
// slow store renews with one request too. It reports ok=false when a read
// is needed (not its record, or the record changed under it).
func (e *Elector) renewBlind(ctx context.Context, start time.Time) (held, ok bool) {
	e.mu.Lock()
	v := e.view
	// Leading, or the record is still the version this candidate wrote
	// last (its claim lapsed, a renewal too slow): nobody wrote since, so
	// the conditional Update is a renewal like any other.
	ours := e.leading || v.version == e.writtenVersion && v.version != e.deferredVersion
	mine := ours && !e.stopped && !e.lost && !e.holdingOffLocked(start) && v.present &&
		v.rec.HolderIdentity == e.cfg.Identity && v.rec.Transitions == e.token
	e.mu.Unlock()
	if !mine {
		return false, false
	}
	rec := v.rec
	rec.RenewTime = start
	rec.LeaseDurationSeconds = e.leaseSeconds()
	rec.Handoff = backend.Handoff{} // a renewal ends any hand-off left open
	written, err := e.cfg.Backend.Update(ctx, v.version, rec)
	e.rememberUnanswered(rec, err)
	switch {
	case err == nil:
		e.won(rec, written, start, start)
		return true, true
	case errors.Is(err, backend.ErrConflict), errors.Is(err, backend.ErrNotFound):
		return false, false // someone else wrote: read, then decide
	default:
		e.failed("renew", err)
		return false, true
	}
}

// unchangedSinceWritten reports whether a check's read leaves nothing to
// do: the record is the version this leader wrote last, or the read failed
// (the renewal, when due, finds out what the store says). A failed check
// is not a failed renewal: the leader keeps its schedule.
func (e *Elector) unchangedSinceWritten(present bool, version backend.Version, err error) bool {
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		e.log.Debug("could not read the record after a change signal", "err", err)
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return present && version == e.writtenVersion
}

// decideAfterRead records what a read answered at seen, applies the rules
// and returns the action with the record it writes.
func (e *Elector) decideAfterRead(present, neverCreated bool, rec backend.Record, version backend.Version, seen time.Time) (action, backend.Record) {
	e.mu.Lock()
	defer e.unlockAndNotify()
	e.reachedStore = true
	e.failures.succeeded(e.log)
	if e.observeLocked(present, rec, version, seen) {
		// A read found a change no snapshot reported: poll until the
		// backend's watch shows it is keeping up again.
		e.pollFast = true
	}
	// Only a store that can make the first create atomic (CreateFirst)
	// lets a candidate lead at once on a record it had to create.
	_, firstCreator := e.cfg.Backend.(backend.FirstCreator)
	e.view.neverCreated = !present && neverCreated && firstCreator
	a := decide(e.observationLocked(seen), seen)
	e.log.Debug("decided", "action", a.kind.String(), "token", a.token, "until", a.until,
		"stepDown", a.stepDown, "holder", e.view.holder(), "seenToken", e.view.rec.Transitions)
	if a.stepDown != "" {
		why := TermLost
		if e.holdingOffLocked(seen) {
			why = TermReleased
		}
		e.stepDownLocked(why, a.stepDown)
	}
	if a.exhausted && !e.exhaustedSince.Equal(e.view.since) {
		e.exhaustedSince = e.view.since
		seenToken, highest := e.view.rec.Transitions, e.highestToken
		e.log.Error("no fencing token is left: nobody can take the record over until it is reset",
			"token", seenToken, "max", backend.MaxTransitions)
		e.tellLocked(func(o Observer) { o.TokenAnomaly(TokenExhausted, seenToken, highest) })
	}
	switch a.kind {
	case renew:
		renewed := rec
		renewed.LeaseDurationSeconds = e.leaseSeconds()
		renewed.RenewTime = seen
		renewed.Handoff = backend.Handoff{}
		if renewed.AcquireTime.IsZero() {
			renewed.AcquireTime = seen
		}
		return a, renewed
	case accept:
		return a, acceptRecord(rec, e.cfg.Identity)
	case releaseTransfer:
		return a, ReleaseShape(a.token, seen)
	case acquire, recreate:
		rec := backend.Record{
			HolderIdentity:       e.cfg.Identity,
			LeaseDurationSeconds: e.leaseSeconds(),
			AcquireTime:          seen,
			RenewTime:            seen,
			Transitions:          a.token,
		}
		if a.deferClaim {
			// Not renewed yet: the claim starts with the first renewal,
			// a lease duration on, and a reader of the record (sidecar
			// status) can tell a pending claim from a held one.
			rec.RenewTime = time.Time{}
		}
		return a, rec
	}
	return a, backend.Record{}
}

// acceptSent records the answer to this candidate's accept of an offer
// (rec, written by an attempt that started at start). The accept is
// remembered unless the store refused it: a write whose outcome is unknown
// may have landed, and the leader may transfer on it. Remembering one that
// did not land costs nothing: no transfer can name this candidate then.
func (e *Elector) acceptSent(rec backend.Record, written backend.Version, err error, start time.Time) {
	if err != nil {
		e.failed("hand-off accept", err)
		if errors.Is(err, backend.ErrConflict) || errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrStoreLost) {
			return
		}
	}
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	defer e.unlockAndNotify()
	e.accepted = acceptedOffer{from: rec.Handoff.From, token: rec.Handoff.Token, at: start}
	if err == nil {
		e.reachedStore = true
		e.observeLocked(true, rec, written, now)
		e.writtenVersion = written
		e.log.Info("accepted a hand-off; leading once the leader transfers the record",
			"from", rec.Handoff.From, "token", rec.Handoff.Token)
	}
}

// recreatedUnclaimed records a record this candidate recreated but will
// claim only after a lease duration (decide's deferClaim).
func (e *Elector) recreatedUnclaimed(rec backend.Record, version backend.Version) {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	defer e.unlockAndNotify()
	e.reachedStore = true
	e.deferredGap = gapStart{since: e.view.since, known: e.view.sawRecord}
	e.observeLocked(true, rec, version, now)
	e.deferredVersion, e.writtenVersion = version, version
	e.log.Info("created the missing record; claiming it once any holder of an earlier record must have stopped claiming",
		"token", rec.Transitions, "claimFrom", e.observationLocked(now).expiry())
}

// won records a successful write of rec, sent at sent (or before) by an
// attempt that started at start: the claim it gives counts from then, and
// the write's latency sizes the leader's next tries (attemptTimeout).
func (e *Elector) won(rec backend.Record, version backend.Version, start, sent time.Time) {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	defer e.unlockAndNotify()
	e.reachedStore = true
	e.lastWriteTook = now.Sub(sent)
	e.failures.succeeded(e.log)
	gap := e.gapStartLocked(e.view)
	e.observeLocked(true, rec, version, now)
	e.writtenVersion = version
	e.readAgainUsed = false
	// A Release or shutdown that began during this attempt wins: the record
	// names us, but we do not claim it, and the release that follows
	// clears it.
	if e.stopped || e.lost || e.holdingOffLocked(start) {
		e.notifyLocked()
		return
	}
	newTerm := !e.leading || e.token != rec.Transitions
	e.leading, e.renewedAt, e.token = true, start, rec.Transitions
	if newTerm {
		e.termStarted = start
		e.accepted = acceptedOffer{}
		e.log.Info("became leader", "token", rec.Transitions)
		t := TermStart{Token: rec.Transitions, Started: start}
		if gap.known {
			t.Gap, t.HasGap = max(0, now.Sub(gap.since)), true
		}
		e.tellLocked(func(o Observer) {
			o.LeadershipChanged(true, t.Token)
			if o, ok := o.(TermObserver); ok {
				o.TermStarted(t)
			}
		})
	}
	e.notifyLocked()
}

// rememberUnanswered remembers rec, sent by a renewal that failed with
// err, when the outcome of that write is unknown: a request cancelled,
// timed out or lost in transport may have landed. A refusal by the store
// (a conflict, a missing record, a lost store) says it did not. Only the
// renewals of a record the rules let this candidate renew (its claim, or
// a version it wrote) are remembered: a write that, answered, would have
// been its own known write; never a create or an accept.
func (e *Elector) rememberUnanswered(rec backend.Record, err error) {
	if err == nil || errors.Is(err, backend.ErrConflict) || errors.Is(err, backend.ErrNotFound) ||
		errors.Is(err, backend.ErrStoreLost) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.unanswered) == unansweredKept {
		e.unanswered = slices.Delete(e.unanswered, 0, 1)
	}
	e.unanswered = append(e.unanswered, rec)
}

// unansweredKept is how many renewals of unknown outcome a candidate
// remembers (Elector.unanswered): a store unreachable for long must not
// grow the list, and forgetting one only leaves its record to expire.
const unansweredKept = 4

// sameRecord reports whether stored, as read back, is sent, as written:
// every field equal, the times at the precision every store keeps.
func sameRecord(stored, sent backend.Record) bool {
	return stored.HolderIdentity == sent.HolderIdentity &&
		stored.Transitions == sent.Transitions &&
		stored.LeaseDurationSeconds == sent.LeaseDurationSeconds &&
		stored.Handoff == sent.Handoff &&
		stored.AcquireTime.Equal(sent.AcquireTime.Truncate(backend.TimePrecision)) &&
		stored.RenewTime.Equal(sent.RenewTime.Truncate(backend.TimePrecision))
}

// failed records a failed store request. A lost store ends the election.
// A request cancelled by this candidate (it is stopping) says nothing of
// the store: it is logged at debug level only.
func (e *Elector) failed(op string, err error) {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	defer e.unlockAndNotify()
	e.attemptFailed = true
	switch {
	case errors.Is(err, backend.ErrStoreLost):
		e.loseLocked(err)
		return
	case errors.Is(err, backend.ErrConflict), errors.Is(err, backend.ErrAlreadyExists):
		e.log.Debug("lost a race for the record", "op", op, "err", err)
		if e.leading && !e.readAgainUsed {
			e.readAgainNow, e.readAgainUsed = true, true
			e.attemptFailed = false
			return
		}
	case errors.Is(err, context.Canceled):
		e.log.Debug("store request cancelled", "op", op, "err", err)
	default:
		e.failures.failed(e.log, now, op, err)
	}
	if e.leading {
		e.tellLocked(func(o Observer) { o.RenewFailed(err) })
	}
}

// loseLocked ends the election for good: the store this candidate used is
// gone, so nothing it knows about the record holds any more.
func (e *Elector) loseLocked(err error) {
	if e.lost {
		return
	}
	e.log.Error("the store was deleted or replaced: stopping at once", "err", err)
	e.stepDownLocked(TermLost, "the store was lost")
	e.lost = true
	close(e.lostCh)
	e.notifyLocked()
}

// stepDownLocked ends this candidate's term, for why (explained in the
// log by reason).
func (e *Elector) stepDownLocked(why TermEndReason, reason string) {
	if !e.leading {
		return
	}
	e.leading = false
	e.log.Info("stopped leading", "token", e.token, "reason", reason)
	t := TermEnd{Token: e.token, Reason: why}
	e.tellLocked(func(o Observer) {
		o.LeadershipChanged(false, t.Token)
		if o, ok := o.(TermObserver); ok {
			o.TermEnded(t)
		}
	})
	e.notifyLocked()
}

func (e *Elector) leaseSeconds() int32 { return int32(e.cfg.LeaseDuration / time.Second) }

func (e *Elector) holdingOffLocked(now time.Time) bool {
	return e.sittingOut || now.Before(e.holdOffUntil)
}
