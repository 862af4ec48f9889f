package election

import (
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// This file is the candidate's side of a planned hand-off (see the package
// doc, "Planned hand-off"), as pure functions of what it knows and the
// time, like decide.

// acceptedOffer is what a candidate remembers of the last hand-off offer
// it accepted: in memory only, so a marker that names it is inert unless
// this very process accepted the offer it answers.
type acceptedOffer struct {
	// from and token are the offering leader and its token.
	from  string
	token int64
	// at is when the attempt that wrote the accept started.
	at time.Time
}

// mayAcceptHandoff is the one place that decides whether this candidate
// may take leadership handed to it: accept an offer, and claim the record
// transferred to it after its accept. A candidate that is stopping (or
// lost its store), sitting out (its app is unhealthy), held off after a
// release, or still counts itself leader (it will step down first) may
// not.
func mayAcceptHandoff(o observation, now time.Time) bool {
	return !o.stopped && !o.leading && !o.sittingOut && !now.Before(o.holdOffUntil)
}

// targets reports whether the target of an offer, to, names the candidate
// identity: "" names every candidate, otherwise to is the identity itself
// or its prefix (the Pod name, IdentityPrefix).
func targets(to, identity string) bool {
	return to == "" || to == identity || to == IdentityPrefix(identity)
}

// handoffStep is what the hand-off asks of this candidate for the record
// it observed, if anything (ok false: the other rules apply):
//
//   - accept an offer it may take: a live record (not yet expired) whose
//     holder is offering at the record's token, which is the highest
//     token this candidate has seen (so the transfer's token is new), to
//     this candidate or to anyone;
//   - renew, and so lead with its token from the start of that write, a
//     record transferred to it by the leader whose offer it accepted, at
//     a token above that offer's (and the highest it has seen), within a
//     lease duration of its accept.
//
// A transferred record without such an accept (a hand edit, or a marker
// left behind) is waited out by the other rules, as any record naming
// this candidate that it did not write.
func (o observation) handoffStep(now time.Time) (action, bool) {
	v := o.view
	h := v.rec.Handoff
	if !v.present || h.IsZero() || h.Token != v.rec.Transitions || h.Token != o.highest {
		return action{}, false
	}
	if !mayAcceptHandoff(o, now) {
		// A transfer after this candidate's accept, which it may no
		// longer take (it sits out, is held off, or is stopping): nobody
		// claims it, so it is released at once rather than waited out.
		if o.transferredToUs(now) && !o.stopped && !o.leading {
			return action{kind: releaseTransfer, token: h.Token}, true
		}
		return action{}, false
	}
	switch h.Phase {
	case backend.HandoffOffer:
		offered := h.From == v.rec.HolderIdentity && h.From != o.identity && targets(h.To, o.identity) &&
			h.Token >= 1 && h.Token < backend.MaxTransitions && now.Before(o.expiry())
		return action{kind: accept, token: h.Token}, offered
	case backend.HandoffTransfer:
		return action{kind: renew, token: h.Token}, o.transferredToUs(now)
	}
	return action{}, false
}

// transferredToUs reports whether the observed record is a transfer to
// this candidate from the leader whose offer it accepted, at a token above
// that offer's, within a lease duration of its accept.
func (o observation) transferredToUs(now time.Time) bool {
	v, a := o.view, o.accepted
	h := v.rec.Handoff
	return h.Phase == backend.HandoffTransfer && v.rec.HolderIdentity == o.identity && h.To == o.identity &&
		a.from != "" && h.From == a.from && h.Token > a.token && now.Before(a.at.Add(o.ownLease))
}

// acceptRecord is the record a candidate writes to accept the offer in
// rec: the same record, with the marker turned into an accept naming the
// candidate by its full identity.
func acceptRecord(rec backend.Record, identity string) backend.Record {
	rec.Handoff = backend.Handoff{
		Phase: backend.HandoffAccept,
		From:  rec.Handoff.From,
		To:    identity,
		Token: rec.Handoff.Token,
	}
	return rec
}
