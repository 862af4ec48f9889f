package sim

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"strings"
)

// Summary is one line that says everything a schedule found: its seed,
// renew interval, virtual time, events, terms, hand-offs, moves, how long
// the table took to be held as assigned, every violation, and a hash of
// its trace. Two runs of a seed agree on it exactly when they played the
// same schedule the same way.
func (r Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: renew %v, virtual %v, %d events, %d terms, hand-offs %d/%d/%d, %d moves, settled after %v",
		r.Seed, r.RenewInterval, r.Virtual, r.Events, r.Terms, r.Handoffs, r.HandedOff, r.StoppedTargets, r.Moves, r.SettledAfter)
	if r.Rollout { // only then: the other schedules' lines are as they were
		fmt.Fprintf(&b, ", rolling update: %d leaders stopped, %d handed off on stop, %d to the other revision, %d crashed stopping",
			r.LeadersStopped, r.StopHandedOff, r.StopToOtherRevision, r.CrashedStopping)
		if r.StopReleasedPending > 0 { // likewise
			fmt.Fprintf(&b, ", %d pending claims released on stop", r.StopReleasedPending)
		}
		if r.StatefulSet { // likewise
			fmt.Fprintf(&b, ", a StatefulSet's: releases left to a replacement taken by it %d, by another revision %d, after the wait %d",
				r.ReservedTaken[0], r.ReservedTaken[1], r.ReservedTaken[2])
		}
	}
	if r.StoreRestarts+r.Failovers > 0 { // likewise
		fmt.Fprintf(&b, ", store: %d restarts, %d failovers losing %d writes, %d tokens handed out twice, %d requests cut off (%d committed)",
			r.StoreRestarts, r.Failovers, r.LostWrites, r.TokensHandedTwice, r.Severed, r.CommittedAtCrash)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, ", violation at %v: %q", v.At, v.What)
	}
	h := sha256.New()
	for _, line := range r.Trace {
		io.WriteString(h, line)
		io.WriteString(h, "\n")
	}
	fmt.Fprintf(&b, ", trace %x", h.Sum(nil)[:8])
	return b.String()
}

// Digest hashes schedules' summaries, added in the order of their seeds:
// one figure that two builds of the simulator must agree on over a range
// of seeds (hack/sim -digest).
type Digest struct{ h hash.Hash }

// NewDigest returns an empty digest.
func NewDigest() *Digest { return &Digest{h: sha256.New()} }

// Add takes in the next schedule's result.
func (d *Digest) Add(r Result) {
	io.WriteString(d.h, r.Summary())
	io.WriteString(d.h, "\n")
}

// String is the digest so far, in hexadecimal.
func (d *Digest) String() string { return fmt.Sprintf("%x", d.h.Sum(nil)) }
