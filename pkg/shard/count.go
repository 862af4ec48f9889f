package shard

import "fmt"

// This file is the rule between shard counts. Shard i of N and the shards
// of another count N' that cover the same keys are elections of their
// own, with their own records and guard resources: nothing but this rule
// keeps replicas of two counts of one group (a rolling update of the
// count) from holding the same keys at one instant.
//
// The larger count prevails. A replica that sees a live replica or a live
// holder of a larger count yields: it drains and releases every shard,
// takes none, and says so in its member record once it holds nothing and
// contends for nothing (Yielded). A replica that sees a live holder of a
// smaller count, or a live member of a smaller count that has not
// yielded, waits: it takes no shard it does not hold. So when the count
// grows, the old replicas hand their keys over while they still run, and
// when it shrinks (a rollback), the new replicas wait until the last old
// one is gone. Either way one count holds keys at a time, and only the
// largest count live never yields, so the rule cannot leave both sides
// waiting on each other. An unmarked record (a release that did not mark
// them) counts as count 0: it never yields, so every other count waits
// until it is gone.

// Stance is what the counts a replica sees let it do.
type Stance int

const (
	// Open: no other count is in the way; the replica acts as Decide says.
	Open Stance = iota
	// Wait: the replica's count prevails, but a smaller count still holds
	// a shard or may still take one: it takes no shard it does not hold.
	Wait
	// Yield: a larger count is live: the replica gives up every shard and
	// takes none (Decide with View.Leaving).
	Yield
)

func (s Stance) String() string {
	switch s {
	case Open:
		return "open"
	case Wait:
		return "waiting"
	case Yield:
		return "yielding"
	}
	return fmt.Sprintf("Stance(%d)", int(s))
}

// OtherCount is a live replica of another count as a replica sees it:
// a member whose record carries another count, or the holder a shard
// record names with another count.
type OtherCount struct {
	Count int
	// Holder: a shard record names it as a live holder.
	Holder bool
	// Yielded: its member record says that it holds nothing and contends
	// for nothing (a holder is never yielded).
	Yielded bool
}

// StanceOf returns the stance of a replica of count whose view of the
// other counts is others (any order, repeats allowed).
func StanceOf(count int, others []OtherCount) Stance {
	stance := Open
	for _, o := range others {
		switch {
		case o.Count == count:
		case o.Count > count:
			return Yield
		case o.Holder || !o.Yielded:
			stance = Wait
		}
	}
	return stance
}
