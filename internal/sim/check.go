package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// checker holds the invariants of one election, checked after every
// event. The set of candidates that claim leadership can only grow at an
// event (between events claims only lapse), so checking after each event
// checks every instant.
type checker struct {
	// epoch counts faults after which tokens may rightly start lower: the
	// record deleted, or its token lowered by hand (see "When tokens go
	// back" in docs/backends.md). Token order is checked within an epoch; each
	// running candidate's own tokens must rise across all epochs.
	epoch   int
	owner   map[int64]string // token -> holder, this epoch
	highest int64            // highest token claimed this epoch
	// guard is the resource every leader writes to. After a reset it may
	// rightly refuse a new leader (the recovery in docs/backends.md applies), so
	// refusals count only before the first reset; accepting a write from
	// an older term counts always.
	guard *fence.MemoryGuard
	// order numbers terms in the order they were first claimed; the guard
	// must never accept a write from a term older than one it accepted.
	order        map[fence.TermID]int
	newestWriter int
	// guardLast is the last term whose write the guard accepted: it must
	// never accept a lower token, nor the same token from another holder,
	// whatever the store did.
	guardLast fence.TermID
	// After a failover that lost writes (storefaults.go), for the terms
	// it affected and those only, two leaders at once and a token claimed
	// twice are what the failover rightly does (docs/backends.md,
	// PostgreSQL, Failover), and the guard may refuse the leader
	// (failedOver says which terms).
	lostMax      int64
	lostOwner    map[int64]string
	affectedUpTo int
	affected     map[fence.TermID]bool
	lastToken    map[string]int64 // candidate -> its latest term's token
	terms        int
	lastLeader   time.Duration
	// leaders is afterEvent's scratch space, kept to spare an allocation
	// at every event.
	leaders []leaderStatus
	// leader is the one live candidate that claimed when it last looked,
	// or nil: until the record is touched again, no other can claim, and
	// it claims until leaderUntil on its clock (its Status's ValidUntil:
	// it renews only when touched).
	leader      *candidate
	leaderUntil time.Time
}

// Violation is a broken invariant, at a true time.
type Violation struct {
	At   time.Duration
	What string
}

// violate reports a broken invariant of el's record.
func (c *checker) violate(w *world, el *contest, what string) {
	if w.group != nil {
		what = fmt.Sprintf("shard %d: %s", el.shard, what)
	}
	w.violate(what)
}

func (c *checker) newEpoch() {
	c.epoch++
	c.owner, c.highest = map[int64]string{}, 0
}

func (c *checker) afterEvent(w *world, el *contest) {
	if c.owner == nil {
		c.newEpoch()
		c.order, c.lastToken, c.guard = map[fence.TermID]int{}, map[string]int64{}, fence.NewMemoryGuard()
	}
	// Status is a read at this instant, so one per live candidate does.
	leaders := c.leaders[:0]
	for _, cand := range el.cands {
		if cand.crashed {
			continue
		}
		if s := cand.e.Status(); s.Leader {
			leaders = append(leaders, leaderStatus{cand, s})
		}
	}
	c.leaders, c.leader = leaders, nil
	if len(leaders) == 1 {
		c.leader, c.leaderUntil = leaders[0].cand, leaders[0].s.ValidUntil
	}
	if len(leaders) > 1 {
		names := make([]string, len(leaders))
		lost := false
		for i, l := range leaders {
			names[i] = fmt.Sprintf("%s (token %d, until %v)", l.cand.id, l.s.Token, l.s.ValidUntil.Sub(epoch))
			lost = lost || c.lostTerm(fence.TermID{Token: l.s.Token, Holder: l.cand.id})
		}
		if !lost {
			c.violate(w, el, "two leaders at once: "+strings.Join(names, ", "))
			return
		}
		// A term begun beside one a failover lost is affected too: its
		// holder may take the record over again, as a leader does.
		for _, l := range leaders {
			c.affected[fence.TermID{Token: l.s.Token, Holder: l.cand.id}] = true
		}
		w.logf("two leaders at once, for a term a failover lost: %s", strings.Join(names, ", "))
	}
	for _, l := range leaders {
		c.claimed(w, el, l.cand, fence.TermID{Token: l.s.Token, Holder: l.cand.id})
	}
	if len(leaders) > 0 {
		c.lastLeader = w.now
	}
	c.checkLiveness(w, el)
}

// lostTerm reports whether a failover that lost writes affected term: it
// was claimed before one, or begun by a write it lost, or its token was
// another holder's in a term it lost, or it was claimed beside such a
// term.
func (c *checker) lostTerm(term fence.TermID) bool {
	if order, ok := c.order[term]; ok && order <= c.affectedUpTo || c.affected[term] {
		return true
	}
	first, ok := c.lostOwner[term.Token]
	return ok && first != term.Holder
}

// leaderStatus is a live candidate that claims, as afterEvent found it.
type leaderStatus struct {
	cand *candidate
	s    election.Status
}

// claimed checks one leader's term and writes through the guard.
func (c *checker) claimed(w *world, el *contest, cand *candidate, term fence.TermID) {
	if _, seen := c.order[term]; !seen {
		c.terms++
		// Until the first reset, tokens are unique and rise globally.
		// After one, a candidate that never saw the higher tokens may
		// reuse them ("When tokens go back" in docs/backends.md), but no candidate
		// ever starts a term at or below a token it has seen.
		// A term begun by a write a failover lost, claimed after it (its
		// claim deferred, or its answer late), is out of the line of
		// tokens the store goes on with.
		lost := c.affected[term]
		if owner, ok := c.owner[term.Token]; ok && owner != term.Holder && c.epoch == 1 && !lost {
			c.violate(w, el, fmt.Sprintf("token %d claimed by %s and by %s", term.Token, owner, term.Holder))
		}
		if term.Token <= c.highest && c.epoch == 1 && !lost {
			c.violate(w, el, fmt.Sprintf("%s leads with token %d, not above %d claimed before", term.Holder, term.Token, c.highest))
		}
		if before, ok := cand.seenBeforeWrite[term.Token]; ok && term.Token <= before {
			c.violate(w, el, fmt.Sprintf("%s started a term with token %d after it had seen token %d", cand.id, term.Token, before))
		}
		if last := c.lastToken[cand.id]; term.Token <= last {
			c.violate(w, el, fmt.Sprintf("%s's token went from %d to %d", cand.id, last, term.Token))
		}
		// A token counts as handed out twice once both holders claimed it.
		if first, ok := c.lostOwner[term.Token]; ok && first != term.Holder && c.claimedBy(term.Token, first) {
			w.storeFaults.handedTwice++
			w.logf("token %d handed out twice: to %s, whose term a failover lost, and to %s", term.Token, first, term.Holder)
		}
		if owner, ok := c.owner[term.Token]; ok && owner != term.Holder && lost {
			w.storeFaults.handedTwice++
			w.logf("token %d handed out twice: to %s, and to %s, whose term a failover lost", term.Token, owner, term.Holder)
		}
		c.lastToken[cand.id] = term.Token
		if !lost {
			c.owner[term.Token], c.highest = term.Holder, term.Token
		}
		c.order[term] = len(c.order) + 1
		// The application checked /leader now and writes later.
		w.after(w.between(0, 2*w.opts.RenewDeadline), func() {
			el.touched = true
			c.write(w, el, term, "a late write")
		})
	}
	c.write(w, el, term, "the leader's write")
}

func (c *checker) write(w *world, el *contest, term fence.TermID, what string) {
	err := c.guard.Do("resource", term, func() error { return nil })
	last := c.guardLast
	switch {
	case err == nil && c.order[term] < c.newestWriter:
		c.violate(w, el, fmt.Sprintf("the guard accepted %s from %v after a newer term wrote", what, term))
	case err == nil && (term.Token < last.Token || term.Token == last.Token && term.Holder != last.Holder && last.Holder != ""):
		c.violate(w, el, fmt.Sprintf("the guard accepted %s from %v after one from %v", what, term, last))
	case err == nil:
		c.newestWriter, c.guardLast = c.order[term], term
	case what == "the leader's write" && c.epoch == 1 && term.Token > c.lostMax && !c.lostTerm(term):
		c.violate(w, el, fmt.Sprintf("the guard refused the leader's write from %v: %v", term, err))
	}
}

// claimedBy reports whether holder claimed a term with token.
func (c *checker) claimedBy(token int64, holder string) bool {
	_, ok := c.order[fence.TermID{Token: token, Holder: holder}]
	return ok
}

// failedOver is told that the store failed over to a record with token
// (0 if none), losing the writes of lost. Every term claimed so far may have lost writes: its holder
// may go on claiming until it finds out, beside a new leader (affectedUpTo);
// the claimed tokens above token are lost, and may be handed out again
// (lostOwner); the guard may hold tokens up to the highest claimed, and
// refuse new leaders until the election passes them (lostMax). Token
// order is then checked again from the highest token claimed that the
// store still has, as the election goes on from there.
func (c *checker) failedOver(token int64, lost []backend.Record) {
	if c.owner == nil {
		return // nothing claimed yet
	}
	if c.lostOwner == nil {
		c.lostOwner, c.affected = map[int64]string{}, map[fence.TermID]bool{}
	}
	c.affectedUpTo = len(c.order)
	for term := range c.order {
		c.lostMax = max(c.lostMax, term.Token)
		if term.Token > token {
			c.lostOwner[term.Token] = term.Holder
		}
	}
	for _, rec := range lost {
		if term := (fence.TermID{Token: rec.Transitions, Holder: rec.HolderIdentity}); term.Holder != "" && term.Token > token {
			// Its holder may yet claim it (the answer was on its way) and
			// write to the guard with it.
			c.lostMax = max(c.lostMax, term.Token)
			c.affected[term] = true
			if _, ok := c.lostOwner[term.Token]; !ok {
				c.lostOwner[term.Token] = term.Holder
			}
		}
	}
	c.highest = 0
	for t := range c.owner {
		if t > token {
			delete(c.owner, t)
		} else {
			c.highest = max(c.highest, t)
		}
	}
}

// checkLiveness: once faults have stopped, a leader is back within the
// bound docs/development.md states (Testing). A shard group has a bound
// of its own (group.atEnd): a shard is held only once its target sees it.
func (c *checker) checkLiveness(w *world, el *contest) {
	if w.now < w.quietFrom || w.group != nil {
		return
	}
	if since := w.now - max(c.lastLeader, w.quietFrom); since > w.opts.livenessBound() {
		c.violate(w, el, fmt.Sprintf("no leader for %v after faults stopped (bound %v)", since, w.opts.livenessBound()))
	}
}

func (c *checker) atEnd(w *world, el *contest) {
	if !w.stopped() {
		c.checkLiveness(w, el)
	}
}
