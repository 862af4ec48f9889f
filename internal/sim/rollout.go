package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// The revisions of a rolling update: candidates of oldRevision run until
// it begins; every candidate started after it is of newRevision (until a
// rollback).
const (
	oldRevision = "old"
	newRevision = "new"
)

// rollout is the rolling update of a schedule that has one
// (scheduleRollout), and what its hand-offs on stop did.
type rollout struct {
	rng *rand.Rand
	// statefulSet (Options.StatefulSets) makes it a StatefulSet's, with
	// draws from a stream of their own (ssRng): each old candidate is stopped first and then
	// replaced by one of the same Pod name (its identity's prefix), and
	// every candidate leaves the release it writes on stop to its
	// replacement or another revision for await
	// (election.Config.AwaitReplacement).
	statefulSet bool
	ssRng       *rand.Rand
	await       time.Duration
	// revision is the revision of the candidates started now; from the
	// one being replaced, "" when no update is under way.
	revision, from string
	// leadersStopped counts the leaders stopped gracefully, each of which
	// offers leadership before it releases; handedOff the transfers such
	// a stopping leader wrote that reached the store, toOther those of
	// them to a candidate of another revision; crashedStopping the stops
	// it cut short by a crash; pendingReleased the records a candidate
	// created and, stopped before its claim on them began, released.
	leadersStopped, handedOff, toOther, crashedStopping, pendingReleased int
	// reservedTaken counts the releases left to a replacement that were
	// taken: by the replacement, by another revision, by anyone after
	// the wait.
	reservedTaken [3]int
}

// scheduleRollout gives a quarter of the lone election's schedules a
// rolling update from one revision to another, which the sidecar's
// hand-off on stop is for: every candidate hands off on stop
// (election.Config.HandoffOnStop) with its revision (Config.Revision);
// from an instant in the first half of the faults, one candidate of the
// new revision starts, then one of the old revision still running (the
// leader, half the time, if it is one) is stopped gracefully, and so on
// until none is left; then, half the time, it is rolled back the same
// way. One stop in three is cut short by a crash within a second and a
// half, while the stopping leader offers leadership or releases. The
// other faults go on meanwhile. The draws come from a random stream of their own, so a
// schedule without a rolling update is exactly the schedule its seed
// drew before they existed; Options.NoHandoffs leaves them out too.
//
// With Options.StatefulSets the rolling updates are a StatefulSet's,
// drawn from a stream of their own again: an old candidate (the leader,
// half the time) is stopped
// first, and once it is gone a candidate of its Pod name and the new
// revision starts, as a StatefulSet replaces its Pods; every candidate
// leaves the release it writes on stop for 1s to two leases (at most as
// long as the candidates trust a record's lease) to its replacement or
// another revision (election.Config.AwaitReplacement).
func scheduleRollout(w *world) {
	rng, ok := rollsOut(w.opts)
	if !ok {
		return
	}
	w.rollout = &rollout{rng: rng, revision: oldRevision}
	if w.opts.StatefulSets {
		ss := rand.New(rand.NewPCG(uint64(w.opts.Seed), 0x57a7))
		w.rollout.statefulSet, w.rollout.ssRng = true, ss
		w.rollout.await = time.Second + time.Duration(ss.Int64N(int64(2*w.opts.LeaseDuration-time.Second)))
		w.rollout.await = min(w.rollout.await.Truncate(time.Millisecond), w.opts.trustedRecordLease())
	}
	begin := time.Duration(rng.Int64N(int64(w.quietFrom / 2)))
	w.at(begin, func() { w.beginRollout(oldRevision, newRevision) })
}

// rollsOut reports whether the schedule of o has a rolling update, and
// returns the random stream its draws come from.
func rollsOut(o Options) (*rand.Rand, bool) {
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x5011))
	return rng, rng.IntN(4) == 0 && !o.NoHandoffs && o.Shards == 0
}

// beginRollout starts replacing the candidates of revision from by
// candidates of revision to.
func (w *world) beginRollout(from, to string) {
	w.logf("FAULT: rolling update from revision %q to %q", from, to)
	w.rollout.from, w.rollout.revision = from, to
	w.rollOne()
}

// rollOne starts a candidate of the new revision and, after a while,
// stops one of the old revision, then does it again, until no candidate
// of the old revision runs (or the faults' tail is reached).
func (w *world) rollOne() {
	r := w.rollout
	var old []*candidate
	for _, c := range w.live() {
		if c.revision == r.from && !c.stopping {
			old = append(old, c)
		}
	}
	if w.now >= w.quietFrom {
		return
	}
	if len(old) == 0 {
		if r.from == oldRevision && r.rng.IntN(2) == 0 { // the rollback
			back, from := time.Duration(r.rng.Int64N(int64(20*time.Second))), r.revision
			r.from = ""
			w.after(back, func() { w.beginRollout(from, oldRevision) })
		}
		return
	}
	if r.statefulSet {
		w.replaceOne(old)
		return
	}
	w.startCandidate()
	victim := nextToStop(old, r.rng)
	w.after(time.Duration(r.rng.Int64N(int64(3*time.Second))), func() { w.stopOld(victim) })
}

// nextToStop draws which of old a rolling update stops next: one at
// random, or, half the time, the leader if it is one of them (the stop
// that hands off).
func nextToStop(old []*candidate, rng *rand.Rand) *candidate {
	victim := old[rng.IntN(len(old))]
	if rng.IntN(2) == 0 {
		for _, c := range old {
			if c.e.Status().Leader {
				victim = c
			}
		}
	}
	return victim
}

// replaceOne stops one of old (the leader, half the time), as a
// StatefulSet's rolling update does, and once it is gone starts its
// replacement: a candidate of the same Pod name and the new revision.
// Then it goes on with the next.
func (w *world) replaceOne(old []*candidate) {
	r := w.rollout
	victim := nextToStop(old, r.ssRng)
	w.after(time.Duration(r.ssRng.Int64N(int64(3*time.Second))), func() { w.stopThenReplace(victim) })
}

// stopThenReplace stops c (stopInRollout) and, once it is gone, starts
// its replacement after a Pod's start-up, of up to five seconds.
func (w *world) stopThenReplace(c *candidate) {
	r := w.rollout
	w.stopInRollout(c, r.ssRng, "the StatefulSet's rolling update", 0, func() {
		var replace func()
		replace = func() {
			if w.now >= w.quietFrom {
				return
			}
			if !c.crashed {
				w.after(500*time.Millisecond, replace)
				return
			}
			w.after(time.Duration(r.ssRng.Int64N(int64(5*time.Second))), func() {
				if w.now >= w.quietFrom {
					return
				}
				w.started++
				id := fmt.Sprintf("%s_%d", election.IdentityPrefix(c.identity), w.started)
				rate := 1 + w.opts.Drift*(2*w.rng.Float64()-1)
				w.logf("%s replaces %s", id, c.id)
				w.newCandidate(w.elections[0], id, id, rate)
				w.after(2*time.Second+time.Duration(r.ssRng.Int64N(int64(8*time.Second))), w.rollOne)
			})
		}
		replace()
	})
}

// checkReservedTaken checks the rule of a release left to a replacement
// (election.Config.AwaitReplacement): a candidate c whose acquire of such
// a release (prev, in the store since since) has just landed is the
// stopping candidate's replacement (its Pod name), of another revision,
// or waited the marker's wait on its clock after it saw the release: at
// least wait/(1+Drift) of true time, a microsecond less for the rounding
// of clock rates.
func (w *world) checkReservedTaken(c *candidate, prev backend.Record, since time.Duration, rec backend.Record) {
	h := prev.Handoff
	r := w.rollout
	if r == nil || h.Phase != backend.HandoffReserve || !election.IsReleaseShape(prev) || rec.HolderIdentity != c.identity || h.Token != prev.Transitions {
		return
	}
	switch {
	case h.To != "" && election.IdentityPrefix(c.identity) == h.To:
		r.reservedTaken[0]++
	case c.revision != "" && h.Revision != "" && c.revision != h.Revision:
		r.reservedTaken[1]++
	default:
		r.reservedTaken[2]++
		wait := time.Duration(float64(h.Wait)/(1+w.opts.Drift)) - time.Microsecond
		if held := w.now - since; held < wait {
			c.el.check.violate(w, c.el, fmt.Sprintf("%s (revision %q) took a release %s left to its replacement %s or another revision %v after it was written, before the %v it is left for",
				c.id, c.revision, h.From, h.To, held, h.Wait))
		}
	}
}

// stopOld stops c (stopInRollout) and goes on with the next.
func (w *world) stopOld(c *candidate) {
	r := w.rollout
	w.stopInRollout(c, r.rng, "the rolling update", 0, func() {
		w.after(2*time.Second+time.Duration(r.rng.Int64N(int64(8*time.Second))), w.rollOne)
	})
}

// stopInRollout stops c gracefully, as a rolling update's SIGTERM, once
// it can (it is not paused or in an activity: tried again every half
// second, a hundred times at most), cuts the stop short by a crash
// within a second and a half one time in three, drawing from rng, and
// then calls next, unless the faults' tail has begun.
func (w *world) stopInRollout(c *candidate, rng *rand.Rand, update string, tries int, next func()) {
	r := w.rollout
	if w.now >= w.quietFrom {
		return
	}
	stopped := !c.crashed && c.stop()
	if !stopped && !c.crashed && tries < 100 {
		w.after(500*time.Millisecond, func() { w.stopInRollout(c, rng, update, tries+1, next) })
		return
	}
	if stopped {
		w.logf("FAULT: stop %s (revision %q) in %s", c.id, c.revision, update)
		if rng.IntN(3) == 0 {
			w.after(w.upToQuiet(time.Duration(rng.Int64N(int64(1500*time.Millisecond)))), func() {
				if !c.crashed {
					r.crashedStopping++
					w.logf("FAULT: crash %s while it stops", c.id)
					c.crash()
				}
			})
		}
	}
	next()
}

// checkSameRevisionWait checks the rule that makes a rolling update hand
// off to the new revision: a candidate whose accept of an offer to anyone
// from a leader of its own revision (prev, the record it accepted, in the
// store since since) has just landed waited SameRevisionWait on its clock
// after it saw the offer, which the store held since then, so that a
// candidate of another revision may accept first. On the fastest clock
// the schedule allows, that is SameRevisionWait/(1+Drift) of true time; a
// microsecond less, for the rounding of clock rates to whole nanoseconds.
func (w *world) checkSameRevisionWait(c *candidate, prev backend.Record, since time.Duration, rec backend.Record) {
	h, a := prev.Handoff, rec.Handoff
	if a.Phase != backend.HandoffAccept || a.To != c.identity || h.Phase != backend.HandoffOffer ||
		h.To != "" || h.Revision == "" || h.Revision != c.revision {
		return
	}
	wait := time.Duration(float64(c.e.SameRevisionWait())/(1+w.opts.Drift)) - time.Microsecond
	if held := w.now - since; held < wait {
		c.el.check.violate(w, c.el, fmt.Sprintf("%s (revision %q) accepted an offer to anyone from %s, of its own revision, %v after it was made, before the %v that lets another revision take it first",
			c.id, c.revision, h.From, held, c.e.SameRevisionWait()))
	}
}

// releasedPendingOnStop counts a release that c, stopping, wrote over a
// record it created and never claimed (one with no renewal time): the
// release of a pending claim (election's releasePendingClaim).
func (w *world) releasedPendingOnStop(c *candidate, prev, rec backend.Record) {
	r := w.rollout
	if r == nil || !c.stopping || prev.HolderIdentity != c.identity || !prev.RenewTime.IsZero() || !election.IsReleaseShape(rec) {
		return
	}
	r.pendingReleased++
	w.logf("%s released the record it created, stopped before its claim began", c.id)
}

// handedOffOnStop counts a transfer that c, stopping, wrote to the
// store: a hand-off on stop that took effect.
func (w *world) handedOffOnStop(c *candidate, rec backend.Record) {
	r := w.rollout
	if r == nil || !c.stopping || rec.Handoff.Phase != backend.HandoffTransfer {
		return
	}
	r.handedOff++
	for _, to := range w.candidates {
		if to.identity == rec.Handoff.To && to.revision != c.revision {
			r.toOther++
		}
	}
	w.logf("%s handed leadership off on stop to %s", c.id, rec.Handoff.To)
}
