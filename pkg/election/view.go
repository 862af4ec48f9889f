package election

import (
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// view is what a candidate last learnt about the record: from a read, a
// snapshot or its own write.
type view struct {
	// known is set by the first answer, a record or its absence.
	known bool
	// present is false while the last answer said the record is missing;
	// rec then still holds the last record seen.
	present bool
	// sawRecord is set once any record has been seen.
	sawRecord bool
	// neverCreated is set while the last answer said the record is missing
	// and the store proved none was ever created (backend.ErrNeverCreated).
	neverCreated bool
	rec          backend.Record
	// version is the record's version; empty while it is missing.
	version backend.Version
	// since is when this candidate first saw this version (or this
	// absence): the moment an answer arrived, never when it was asked.
	since time.Time
}

// holder is the holder named by the record, "" if it is missing.
func (v view) holder() string {
	if !v.present {
		return ""
	}
	return v.rec.HolderIdentity
}

// observeLocked records an answer that arrived at. A new version (or a
// new absence) restarts the expiry wait; the same version again changes
// nothing. It reports whether anything changed.
func (e *Elector) observeLocked(present bool, rec backend.Record, version backend.Version, at time.Time) bool {
	v := &e.view
	if v.known && v.present == present && (!present || v.version == version) {
		return false
	}
	defer e.logLeaderChangeLocked(*v)
	if present {
		*v = view{known: true, present: true, sawRecord: true, rec: rec, version: version, since: at}
		e.highestToken = max(e.highestToken, rec.Transitions)
	} else {
		v.known, v.present, v.version, v.since, v.neverCreated = true, false, "", at, false
	}
	e.notifyLocked()
	return true
}

// observationLocked is what decide needs, at now.
func (e *Elector) observationLocked(now time.Time) observation {
	return observation{
		identity:     e.cfg.Identity,
		view:         e.view,
		highest:      e.highestToken,
		leading:      e.leading,
		claiming:     e.claimingLocked(now),
		token:        e.token,
		holdOffUntil: e.holdOffUntil,
		sittingOut:   e.sittingOut,
		stopped:      e.stopped || e.lost,
		ownLease:     e.cfg.LeaseDuration,
		deferred:     e.deferredVersion,
		written:      e.writtenVersion,
		accepted:     e.accepted,
	}
}
