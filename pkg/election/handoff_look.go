package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

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
	readCtx, cancel := context.WithDeadline(ctx, h.offered.Add(h.timeout+handoffPoll))
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
