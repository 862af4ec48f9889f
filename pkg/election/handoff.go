package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// ErrNoTaker is returned by Handoff when no candidate accepted the offer in
// time (or the target named cannot be one). Nothing was handed off: the
// leader still leads with the same token.
var ErrNoTaker = errors.New("no candidate accepted the hand-off")

const (
	// handoffPoll is how often the leader looks for an accept while its
	// offer is open.
	handoffPoll = 10 * time.Millisecond
	// handoffReadEvery is how often it reads the record while it looks,
	// when the backend is a backend.Snapshotter: an accept then normally
	// arrives through the watch, without a request.
	handoffReadEvery = 100 * time.Millisecond
	// maxHandoffTimeout bounds the wait for an accept.
	maxHandoffTimeout = time.Second
	// maxTargetLength bounds the target of a hand-off.
	maxTargetLength = 1024
)

// HandoffTimeout is how long a leader waits for a candidate to accept its
// offer: a second, or half the renew deadline when that is shorter.
func (e *Elector) HandoffTimeout() time.Duration {
	return min(maxHandoffTimeout, e.cfg.RenewDeadline/2)
}

// SameRevisionWait is how long this candidate lets an offer to anyone from
// a leader of its own revision stand before it accepts (Config.Revision):
// a quarter of HandoffTimeout, 250ms at the default timings.
func (e *Elector) SameRevisionWait() time.Duration {
	return e.HandoffTimeout() / 4
}

// Handoff moves leadership from this candidate, the leader, to the
// candidate to names (its identity, or its Pod name: see targets), or with
// to empty to whichever candidate answers first, with the next token. It
// follows the protocol of the package doc ("Planned hand-off"): an offer in
// the record, an accept written by the candidate, then the transfer, which
// this candidate writes after it has stopped claiming. It returns the
// status afterwards: not leader, the new holder named.
//
// Errors: ErrNotLeader (wrapped) when this candidate does not lead, or
// stopped leading meanwhile (a Release, a shutdown); nothing was offered or
// handed off. ErrNoTaker (wrapped, with a message naming the target) when
// no candidate accepted within HandoffTimeout: the offer is withdrawn and
// this candidate still leads with its token. The context's error when ctx
// ended first, also with the offer withdrawn. Any other error is the
// store's: if the transfer itself could not be written, this candidate has
// stopped leading regardless, and the election carries on as after a
// leader's crash.
func (e *Elector) Handoff(ctx context.Context, to string) (Status, error) {
	if len(to) > maxTargetLength {
		return e.Status(), fmt.Errorf("%w: the target is %d bytes long, more than any identity (%d)", ErrNoTaker, len(to), maxTargetLength)
	}
	e.opMu.Lock()
	defer e.opMu.Unlock()
	h := &handoff{e: e, to: to, timeout: e.HandoffTimeout()}
	if err := h.offer(ctx); err != nil {
		return e.Status(), err
	}
	version, target, err := h.awaitAccept(ctx)
	if err != nil {
		return e.Status(), err
	}
	return h.transfer(ctx, version, target)
}

// handoff is one run of Handoff, on the leader. The caller holds opMu.
type handoff struct {
	e       *Elector
	to      string
	timeout time.Duration
	// token is the leader's token; rec and version the latest record seen
	// that still names the leader at that token.
	token    int64
	rec      backend.Record
	version  backend.Version
	offered  time.Time
	lastRead time.Time
	// moved says how a read found the record changed under the offer
	// (another holder or token, or none); "" while it is unchanged.
	moved string
}

// offer renews the record with an offer marker. If the record changed
// since this candidate last wrote it, it applies the rules once (an
// attempt) and tries again.
func (h *handoff) offer(ctx context.Context) error {
	e := h.e
	for try := 0; ; try++ {
		start := e.cfg.Clock.Now()
		e.mu.Lock()
		v, token, claiming := e.view, e.token, e.claimingLocked(start) && !e.holdingOffLocked(start)
		e.mu.Unlock()
		ours := v.present && v.rec.HolderIdentity == e.cfg.Identity && v.rec.Transitions == token
		switch {
		case !claiming:
			return fmt.Errorf("%w: nothing to hand off (the record names %q)", ErrNotLeader, v.holder())
		case h.to == e.cfg.Identity:
			return fmt.Errorf("%w: %q is this candidate itself, the leader", ErrNoTaker, h.to)
		case !ours && try == 0:
			e.attempt(ctx)
			continue
		case !ours:
			return fmt.Errorf("hand-off: the record changed under the leader (it names %q at token %d); try again", v.holder(), v.rec.Transitions)
		case token >= backend.MaxTransitions:
			return fmt.Errorf("%w: no token is left for the next term (token %d is the largest a store keeps)", ErrNoTaker, token)
		}
		rec := v.rec
		rec.RenewTime = start
		rec.LeaseDurationSeconds = e.leaseSeconds()
		rec.Handoff = backend.Handoff{Phase: backend.HandoffOffer, From: e.cfg.Identity, To: h.to, Token: token, Revision: e.cfg.Revision}
		written, err := e.cfg.Backend.Update(ctx, v.version, rec)
		e.rememberUnanswered(rec, err)
		switch {
		case err == nil:
			e.won(rec, written, start, start)
			h.token, h.rec, h.version, h.offered, h.lastRead = token, rec, written, start, start
			e.log.Info("offering leadership", "to", h.target(), "token", token)
			return nil
		case try == 0 && (errors.Is(err, backend.ErrConflict) || errors.Is(err, backend.ErrNotFound)):
			e.attempt(ctx)
		default:
			e.failed("hand-off offer", err)
			return fmt.Errorf("hand-off: writing the offer: %w", err)
		}
	}
}

// awaitAccept looks for an accept of the offer every handoffPoll until
// one is found (its version and the candidate's identity), this candidate
// stops leading, or the offer times out and is withdrawn.
func (h *handoff) awaitAccept(ctx context.Context) (backend.Version, string, error) {
	e := h.e
	for {
		if ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-e.cfg.Clock.After(handoffPoll):
			}
		}
		if err := ctx.Err(); err != nil {
			h.withdraw(ctx)
			return "", "", fmt.Errorf("hand-off to %s: %w; the offer was withdrawn and this replica still leads", h.target(), err)
		}
		now := e.cfg.Clock.Now()
		if version, target, ok := h.look(ctx, now); ok {
			return version, target, nil
		}
		if err := h.stillLeading(now); err != nil {
			return "", "", err
		}
		if !now.Before(h.offered.Add(h.timeout)) {
			if version, target, ok := h.withdraw(ctx); ok {
				return version, target, nil // accepted at the last moment
			}
			return "", "", h.noTaker()
		}
	}
}

// look checks the snapshot, or reads the record, for an accept. Whatever
// it learns is observed, as any answer is (so its tokens count among those
// seen). A read that shows the record still naming this candidate at its
// token makes it the one a withdrawal or the transfer writes over; one
// that shows anything else ends the hand-off (stillLeading). A snapshot
// may lag, so only an accept is taken from it.
func (h *handoff) look(ctx context.Context, now time.Time) (backend.Version, string, bool) {
	e := h.e
	if snap, ok := e.cfg.Backend.(backend.Snapshotter); ok {
		if rec, version, ok := snap.Snapshot(); ok {
			e.observe(true, rec, version)
			if target, ok := h.acceptIn(rec); ok {
				return version, target, true
			}
		}
		if now.Sub(h.lastRead) < handoffReadEvery {
			return "", "", false
		}
	}
	h.lastRead = now
	// A read that hangs must not hold the offer open past its timeout.
	readCtx, cancel := e.within(ctx, h.offered.Add(h.timeout+handoffPoll).Sub(now))
	defer cancel()
	rec, version, err := e.cfg.Backend.Get(readCtx)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		e.observe(false, backend.Record{}, "")
		h.moved = "it is missing"
		return "", "", false
	case err != nil:
		return "", "", false // the next look reads again; the timeout bounds it
	}
	e.observe(true, rec, version)
	if target, ok := h.acceptIn(rec); ok {
		return version, target, true
	}
	if rec.HolderIdentity == e.cfg.Identity && rec.Transitions == h.token {
		h.rec, h.version = rec, version
	} else {
		h.moved = fmt.Sprintf("it names %q at token %d", rec.HolderIdentity, rec.Transitions)
	}
	return "", "", false
}

// acceptIn returns the candidate that accepted this offer in rec, if one
// did: the record still names this candidate at its token, and carries
// an accept of its offer by a candidate the offer targets.
func (h *handoff) acceptIn(rec backend.Record) (string, bool) {
	me, a := h.e.cfg.Identity, rec.Handoff
	ok := rec.HolderIdentity == me && rec.Transitions == h.token && a.Phase == backend.HandoffAccept &&
		a.From == me && a.Token == h.token && a.To != "" && a.To != me && targets(h.to, a.To)
	return a.To, ok
}

// stillLeading fails once this candidate has stopped claiming, or a read
// found the record changed under the offer.
func (h *handoff) stillLeading(now time.Time) error {
	e := h.e
	e.mu.Lock()
	claiming := e.claimingLocked(now) && !e.holdingOffLocked(now) && e.token == h.token
	e.mu.Unlock()
	switch {
	case !claiming:
		return fmt.Errorf("%w: it stopped leading during the hand-off (released, stopping, or its claim lapsed); nothing was handed off", ErrNotLeader)
	case h.moved != "":
		return fmt.Errorf("hand-off: the record changed during the hand-off (%s); nothing was handed off", h.moved)
	}
	return nil
}

// withdraw renews the record without the offer. If the record changed
// meanwhile, it reads it once: an accept that landed at the last moment is
// returned for the transfer; otherwise the loop's next renewal clears
// what is left.
func (h *handoff) withdraw(ctx context.Context) (backend.Version, string, bool) {
	e := h.e
	ctx, cancel := e.within(context.WithoutCancel(ctx), e.cfg.RenewDeadline/2)
	defer cancel()
	start := e.cfg.Clock.Now()
	if h.stillLeading(start) != nil {
		return "", "", false
	}
	rec := h.rec
	rec.RenewTime = start
	rec.Handoff = backend.Handoff{}
	written, err := e.cfg.Backend.Update(ctx, h.version, rec)
	e.rememberUnanswered(rec, err)
	switch {
	case err == nil:
		e.won(rec, written, start, start)
		return "", "", false
	case errors.Is(err, backend.ErrConflict), errors.Is(err, backend.ErrNotFound):
		fresh, version, err := e.cfg.Backend.Get(ctx)
		if err == nil || errors.Is(err, backend.ErrNotFound) {
			e.observe(err == nil, fresh, version)
		}
		if target, ok := h.acceptIn(fresh); ok && err == nil {
			return version, target, true
		}
	default:
		e.failed("hand-off withdrawal", err)
	}
	return "", "", false
}

// noTaker is the error of an offer nobody accepted in time.
func (h *handoff) noTaker() error {
	if h.to == "" {
		return fmt.Errorf("%w within %v: no other live candidate of this election may lead now; this replica still leads with token %d",
			ErrNoTaker, h.timeout, h.token)
	}
	return fmt.Errorf("%w: candidate %q did not answer within %v: it is not a live candidate of this election, or it may not lead now; this replica still leads with token %d",
		ErrNoTaker, h.to, h.timeout, h.token)
}

// transfer writes target as the holder with the next token (one above
// the highest this candidate has seen) over the accept at version, after
// this candidate has stopped claiming. Whatever the write's outcome, this
// candidate no longer leads: if it failed, or its outcome is unknown, the
// election carries on as after a leader's crash (the record, whichever it
// is, is waited out).
func (h *handoff) transfer(ctx context.Context, version backend.Version, target string) (Status, error) {
	e := h.e
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	if !e.claimingLocked(now) || e.holdingOffLocked(now) || e.token != h.token {
		e.unlockAndNotify()
		return e.Status(), fmt.Errorf("%w: it stopped leading during the hand-off (released, stopping, or its claim lapsed); nothing was handed off", ErrNotLeader)
	}
	// One above every token seen: a record seen after a reset (a stale
	// snapshot, a hand edit) may have carried a token above this term's.
	next := max(h.token, e.highestToken) + 1
	if next > backend.MaxTransitions {
		e.unlockAndNotify()
		return e.Status(), fmt.Errorf("%w: no token is left for the next term (token %d was seen; %d is the largest a store keeps); this replica still leads with token %d",
			ErrNoTaker, e.highestToken, backend.MaxTransitions, h.token)
	}
	e.stepDownLocked(TermHandedOff, "handing leadership off to "+target)
	e.unlockAndNotify()

	rec := backend.Record{
		HolderIdentity:       target,
		LeaseDurationSeconds: e.leaseSeconds(),
		AcquireTime:          now,
		RenewTime:            now,
		Transitions:          next,
		Handoff:              backend.Handoff{Phase: backend.HandoffTransfer, From: e.cfg.Identity, To: target, Token: next},
	}
	// The client may have gone: the write is still made, as a renewal would be.
	ctx, cancel := e.within(context.WithoutCancel(ctx), e.cfg.RenewDeadline/2)
	defer cancel()
	written, err := e.cfg.Backend.Update(ctx, version, rec)
	if err != nil {
		e.failed("hand-off transfer", err)
		e.log.Warn("could not write the hand-off; this replica has stopped leading, and standbys take over once the lease expires",
			"to", target, "err", err)
		return e.Status(), fmt.Errorf("hand-off to %s: writing the transfer failed, and this replica has stopped leading "+
			"(a standby takes over once the lease expires, as after a crash): %w", target, err)
	}
	e.observe(true, rec, written)
	e.mu.Lock()
	e.writtenVersion = written
	e.mu.Unlock()
	e.log.Info("handed leadership off", "to", target, "token", next)
	return e.Status(), nil
}

func (h *handoff) target() string {
	if h.to == "" {
		return "any candidate"
	}
	return h.to
}
