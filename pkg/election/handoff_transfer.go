package election

import (
	"context"
	"fmt"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

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
		e.unlock()
		return e.Status(), fmt.Errorf("%w: it stopped leading during the hand-off (released, stopping, or its claim lapsed); nothing was handed off", ErrNotLeader)
	}
	// One above every token seen: a record seen after a reset (a stale
	// snapshot, a hand edit) may have carried a token above this term's.
	next := max(h.token, e.highestToken) + 1
	if next > backend.MaxTransitions {
		e.unlock()
		return e.Status(), fmt.Errorf("%w: no token is left for the next term (token %d was seen; %d is the largest a store keeps); this replica still leads with token %d",
			ErrNoTaker, e.highestToken, backend.MaxTransitions, h.token)
	}
	e.stepDownLocked("handing leadership off to " + target)
	e.unlock()

	rec := backend.Record{
		HolderIdentity:       target,
		LeaseDurationSeconds: e.leaseSeconds(),
		AcquireTime:          now,
		RenewTime:            now,
		Transitions:          next,
		Handoff:              backend.Handoff{Phase: backend.HandoffTransfer, From: e.cfg.Identity, To: target, Token: next},
	}
	// The client may have gone: the write is still made, as a renewal would be.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RenewDeadline/2)
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
