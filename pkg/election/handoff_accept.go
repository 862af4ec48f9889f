package election

import (
	"errors"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

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
	defer e.unlock()
	e.accepted = acceptedOffer{from: rec.Handoff.From, token: rec.Handoff.Token, at: start}
	if err == nil {
		e.reachedStore = true
		e.observeLocked(true, rec, written, now)
		e.writtenVersion = written
		e.log.Info("accepted a hand-off; leading once the leader transfers the record",
			"from", rec.Handoff.From, "token", rec.Handoff.Token)
	}
}
