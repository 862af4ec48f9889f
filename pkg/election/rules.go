package election

import (
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// This file is the election's rules, as stated in the package doc, and
// nothing else: decide is a pure function of what a candidate knows and
// the time, so each rule is one row of a table test. The candidate's side
// of a planned hand-off and the identities candidates are known by are
// rules too.

// observation is everything a candidate knows when it decides.
type observation struct {
	identity string
	view     view
	// highest is the highest token this candidate has seen in any record.
	highest int64
	// leading is true while a term of this candidate's is in progress;
	// claiming is true while that term's claim holds (self-demotion).
	leading, claiming bool
	// token is the token of the term in progress.
	token        int64
	holdOffUntil time.Time
	// sittingOut is set between SitOut and Rejoin.
	sittingOut bool
	stopped    bool
	// ownLease is the candidate's own LeaseDuration; maxRecordLease the
	// longest lease duration it trusts a record with
	// (MaxRecordLeaseDuration).
	ownLease, maxRecordLease time.Duration
	// deferred is the version of a record this candidate recreated without
	// claiming it yet (see recreate's deferClaim); "" if none.
	deferred backend.Version
	// written is the version of this candidate's last write that it knows
	// succeeded (answered, or read back after its answer was lost); ""
	// if none.
	written backend.Version
	// accepted is the last hand-off offer this candidate accepted.
	accepted acceptedOffer
	// revision is the candidate's revision (Config.Revision), and
	// sameRevisionWait how long it lets an offer to anyone from a leader
	// of that revision stand before it accepts (SameRevisionWait).
	revision         string
	sameRevisionWait time.Duration
}

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

type actionKind int

const (
	// wait: write nothing now; the rules may allow a write at until (if
	// not zero), or when the record changes.
	wait actionKind = iota
	// renew: write the observed record again, keeping its token.
	renew
	// acquire: start a new term by updating the observed record.
	acquire
	// recreate: start a new term by creating the missing record.
	recreate
	// accept: accept the hand-off offered in the observed record (see
	// handoffStep); the candidate does not lead by it.
	accept
	// releaseTransfer: write the release shape, token kept, over a record
	// transferred to this candidate that it may not take (handoffStep).
	releaseTransfer
)

func (k actionKind) String() string {
	return [...]string{"wait", "renew", "acquire", "recreate", "accept", "release-transfer"}[k]
}

// action is what decide tells a candidate to do.
type action struct {
	kind actionKind
	// token is the token to write: the new term's, or the renewed one's.
	token int64
	// until is, for wait, the instant the rules may allow a write.
	until time.Time
	// stepDown, when not empty, is why the candidate stops leading first.
	stepDown string
	// exhausted is set when a new term is due but its token would exceed
	// backend.MaxTransitions: nobody can take the record over.
	exhausted bool
	// deferClaim, on recreate, means the candidate writes the record but
	// claims it only once it has seen its own record unchanged for a
	// lease duration, as if another candidate had written it.
	deferClaim bool
	// firstStart, on recreate, means the store proved that no record was
	// ever created: the candidate claims the record it creates at once,
	// unless its claim has lapsed by the time the create is answered.
	firstStart bool
}

// decide applies the rules to o at now.
func decide(o observation, now time.Time) action {
	if a, ok := o.handoffStep(now); ok {
		return a
	}
	v := o.view
	switch {
	case o.stopped || !v.known:
		return action{kind: wait}
	case o.sittingOut:
		return action{kind: wait, stepDown: o.stepDownIf(o.leading, "sitting out")}
	case now.Before(o.holdOffUntil):
		return action{kind: wait, until: o.holdOffUntil, stepDown: o.stepDownIf(o.leading, "released")}
	case !v.present:
		// The holder may recreate at once: no one else may act before its
		// claim ends. So may a candidate whose store proved that no record
		// was ever created (the first start on a new store). Anyone else
		// claims the record it creates only a lease duration later: an
		// absence has no version, so a record created and deleted while
		// this candidate was not looking (before it started, paused, or
		// its watch coalesced both) may have a holder that still claims.
		// One that saw a record first also waits out that record's claim
		// before it creates.
		if o.claiming {
			return o.newTerm(recreate)
		}
		if !v.sawRecord {
			a := o.newTerm(recreate)
			a.firstStart = a.kind == recreate && v.neverCreated
			a.deferClaim = a.kind == recreate && !v.neverCreated
			return a
		}
		if !now.Before(o.expiry()) {
			a := o.newTerm(recreate)
			a.deferClaim = a.kind == recreate
			return a
		}
		return action{kind: wait, until: o.expiry(), stepDown: o.stepDownIf(o.leading, "the record disappeared")}
	case v.rec.HolderIdentity == o.identity && v.version == o.deferred && now.Before(o.expiry()):
		return action{kind: wait, until: o.expiry()}
	case v.rec.HolderIdentity == o.identity && (o.claiming || v.version == o.written):
		// Ours: while it claims, nobody else can; and a version it wrote
		// itself is one nobody has written over.
		t := v.rec.Transitions
		if t >= 1 && t == o.highest && (!o.leading || t == o.token) {
			return action{kind: renew, token: t}
		}
		// The token was edited by hand: a new term above every token seen.
		return o.newTerm(acquire)
	case v.rec.HolderIdentity == "":
		// A release is taken at once, and the holder takes back a record
		// emptied under it; any other empty record is waited out.
		if o.claiming || isRelease(v.rec) || !now.Before(o.expiry()) {
			if until, reserved := o.reservedForAnother(now); reserved && !o.claiming {
				return action{kind: wait, until: until}
			}
			return o.newTerm(acquire)
		}
		return action{kind: wait, until: o.expiry(), stepDown: o.stepDownIf(o.leading, "the record was emptied")}
	default:
		// Another holder, or a record naming this candidate that it does
		// not know it wrote (a request that landed after it gave up on it,
		// perhaps after the record was deleted under someone who still
		// claims): waited out all the same.
		stepDown := o.stepDownIf(o.leading, "another candidate holds the record")
		if !now.Before(o.expiry()) {
			a := o.newTerm(acquire)
			a.stepDown = stepDown
			return a
		}
		return action{kind: wait, until: o.expiry(), stepDown: stepDown}
	}
}

// expiry is when the observed record, or its absence, may be acted on:
// the record's lease duration, but never less than the candidate's own
// nor more than the bound it trusts, after the candidate first saw this
// version (or the absence). The floor keeps a lease duration shortened by
// hand from shortening a claim that was made under a longer one; the
// bound keeps one lengthened by a client with a bug or a hand edit
// (2147483647 seconds is 68 years) from holding every candidate off.
func (o observation) expiry() time.Time {
	return o.view.since.Add(max(o.recordLease(), o.ownLease))
}

// recordLease is the observed record's lease duration, up to the bound.
func (o observation) recordLease() time.Duration {
	return min(time.Duration(o.view.rec.LeaseDurationSeconds)*time.Second, o.maxRecordLease)
}

// newTerm starts a term one above the highest token seen, if one is left.
func (o observation) newTerm(kind actionKind) action {
	if o.highest >= backend.MaxTransitions {
		return action{kind: wait, exhausted: true, stepDown: o.stepDownIf(o.leading, "no token is left")}
	}
	return action{kind: kind, token: o.highest + 1}
}

func (o observation) stepDownIf(cond bool, reason string) string {
	if cond {
		return reason
	}
	return ""
}

// isRelease reports whether rec has the shape a release writes, here and
// in client-go: no holder, a lease of one second, acquire time equal to
// renew time. Only such a record is taken over at once.
func isRelease(rec backend.Record) bool {
	return rec.HolderIdentity == "" && rec.LeaseDurationSeconds == 1 && rec.AcquireTime.Equal(rec.RenewTime)
}

// The candidate's side of a planned hand-off (see the package doc,
// "Planned hand-off"), as pure functions of what it knows and the time,
// like decide.

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
		if offered && o.sameRevision(h) && now.Before(v.since.Add(o.sameRevisionWait)) {
			// A candidate of another revision may take it first.
			return action{kind: wait, until: v.since.Add(o.sameRevisionWait)}, true
		}
		return action{kind: accept, token: h.Token}, offered
	case backend.HandoffTransfer:
		return action{kind: renew, token: h.Token}, o.transferredToUs(now)
	}
	return action{}, false
}

// reservedForAnother reports whether the observed record is a release its
// stopping leader left to its own replacement or to another revision (a
// reserve marker, Config.AwaitReplacement) that this candidate, neither,
// may take only later, and until when: the marker's wait from when the
// candidate first saw the record, at most the longest lease it trusts a
// record with. It only delays an acquire of a release, which any
// candidate may otherwise make at once.
func (o observation) reservedForAnother(now time.Time) (time.Time, bool) {
	v, h := o.view, o.view.rec.Handoff
	if h.Phase != backend.HandoffReserve || !isRelease(v.rec) || h.Token != v.rec.Transitions {
		return time.Time{}, false
	}
	replacement := h.To != "" && IdentityPrefix(o.identity) == h.To
	otherRevision := o.revision != "" && h.Revision != "" && o.revision != h.Revision
	until := v.since.Add(min(h.Wait, o.maxRecordLease))
	return until, !replacement && !otherRevision && now.Before(until)
}

// sameRevision reports whether the offer h is to anyone from a leader of
// this candidate's own revision (both known): the rollout that stops the
// leader is likely to stop this candidate too, so it lets a candidate of
// another revision accept first.
func (o observation) sameRevision(h backend.Handoff) bool {
	return h.To == "" && h.Revision != "" && h.Revision == o.revision
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
	rec.Handoff = backend.Handoff{ // no Revision: it was the offer's
		Phase: backend.HandoffAccept,
		From:  rec.Handoff.From,
		To:    identity,
		Token: rec.Handoff.Token,
	}
	return rec
}

// NewIdentity returns "<prefix>_<random UUID>", an identity unique to this
// process start, in the form controller-runtime uses.
func NewIdentity(prefix string) string {
	return prefix + "_" + uuid.NewString()
}

// IdentityPrefix is the prefix NewIdentity was given: identity up to its
// last "_". An identity without "_" (one a client-go candidate chose, for
// instance) is its own prefix. For a sidecar in a Pod the prefix is the
// Pod's name (POD_NAME), which never contains "_".
func IdentityPrefix(identity string) string {
	if i := strings.LastIndexByte(identity, '_'); i >= 0 {
		return identity[:i]
	}
	return identity
}
