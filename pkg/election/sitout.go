package election

import "context"

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
	e.stepDownLocked("sitting out: " + reason)
	if !already {
		e.log.Info("sitting out of the election", "reason", reason)
	}
	e.notifyLocked()
	e.unlock()

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
	e.unlock()
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
