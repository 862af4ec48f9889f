package shard

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// This file is the assignment: which member each shard belongs to,
// computed alike by every replica from the members it sees, without a
// coordinator.

// Table is an assignment: Table[i] is the member shard i belongs to, ""
// when there are no members.
type Table []string

// Load returns how many shards each member of t is given.
func (t Table) Load() map[string]int {
	load := map[string]int{}
	for _, m := range t {
		if m != "" {
			load[m]++
		}
	}
	return load
}

// Shards returns the shards t gives member, in increasing order.
func (t Table) Shards(member string) []int {
	var out []int
	for i, m := range t {
		if m == member && m != "" {
			out = append(out, i)
		}
	}
	return out
}

// FewestMoves is the fewest shards whose member must change to go from
// the table old to any table Assign may give over members (each member
// given floor(n/m) or ceil(n/m) of the n = len(old) shards, m distinct
// members): every member keeps as many of its old shards as its new load
// allows, the members with the most old shards taking the ceil loads, and
// every other shard (one of a member that left, or one given to no one)
// changes member once. It is the yardstick of how much a change of
// members moves.
func FewestMoves(old Table, members []string) int {
	distinct := slices.Compact(slices.Sorted(slices.Values(members)))
	load := old.Load()
	if len(distinct) == 0 { // every held shard loses its member
		held := 0
		for _, l := range load {
			held += l
		}
		return held
	}
	var olds []int
	for _, m := range distinct {
		olds = append(olds, load[m])
	}
	slices.Sort(olds)
	slices.Reverse(olds)
	n := len(old)
	floor, extra := n/len(distinct), n%len(distinct)
	kept := 0
	for i, o := range olds {
		l := floor
		if i < extra {
			l++
		}
		kept += min(o, l)
	}
	return n - kept
}

// FairShare is the most shards a member is given when n shards are spread
// over members members: ceil(n/members); 0 without members.
func FairShare(n, members int) int {
	if members <= 0 {
		return 0
	}
	return (n + members - 1) / members
}

// Assign spreads n shards over members by rendezvous hashing with bounded
// load. Shard by shard, in increasing order, the members are ranked by a
// hash of member and shard (score), and the shard goes to the first in
// rank that still has room. A member has room while it holds fewer than
// floor(n/m) shards (m members), or exactly that many while fewer than
// n mod m members hold one more; so every member is given floor(n/m) or
// ceil(n/m) shards, never more than FairShare.
//
// The table depends only on the set of members: their order and repeats
// in members do not matter. A member joining or leaving moves few shards:
// mostly those the newcomer wins, or those the leaver held (measured in
// the tests and docs/shards.md). Without members every entry is "".
func Assign(n int, members []string) (Table, error) {
	if err := CheckCount(n); err != nil {
		return nil, err
	}
	set := slices.Clone(members)
	slices.Sort(set)
	set = slices.Compact(set)
	if slices.Contains(set, "") {
		return nil, errors.New("a member's identity must not be empty")
	}
	t := make(Table, n)
	if len(set) == 0 {
		return t, nil
	}
	floor, extra := n/len(set), n%len(set)
	load := make(map[string]int, len(set))
	atCeil := 0
	ranked := make([]scored, len(set))
	prefixes := make([]uint64, len(set))
	for j, m := range set {
		prefixes[j] = memberPrefix(m)
	}
	for i := range n {
		for j, m := range set {
			ranked[j] = scored{m, score(prefixes[j], i)}
		}
		rank(ranked)
		for _, c := range ranked {
			l := load[c.member]
			if l < floor || l == floor && atCeil < extra {
				t[i] = c.member
				load[c.member]++
				if l == floor {
					atCeil++
				}
				break
			}
		}
		if t[i] == "" { // the room above always adds up to n
			return nil, fmt.Errorf("shard %d found no member with room (a bug)", i)
		}
	}
	return t, nil
}

// scored is a member and its score for one shard.
type scored struct {
	member string
	score  uint64
}

// rank orders members for one shard: highest score first, ties (which
// need a 64-bit collision) by identity.
func rank(s []scored) {
	slices.SortFunc(s, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return strings.Compare(a.member, b.member)
	})
}

// FNV-1a 64's parameters.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// memberPrefix is the FNV-1a 64 state after the member's identity and a
// zero byte: the part of every score of that member that does not depend
// on the shard.
func memberPrefix(member string) uint64 {
	h := uint64(fnvOffset)
	for k := 0; k < len(member); k++ {
		h ^= uint64(member[k])
		h *= fnvPrime
	}
	h ^= 0
	h *= fnvPrime
	return h
}

// score is the rendezvous weight of a member for shard i: FNV-1a 64 of
// the member's identity, a zero byte and the shard's number as 8 bytes,
// big-endian (continued from memberPrefix), then mixed by SplitMix64's
// finalizer so that identities that differ in one character rank
// independently.
func score(prefix uint64, i int) uint64 {
	h := prefix
	for k := 56; k >= 0; k -= 8 {
		h ^= uint64(i) >> k & 0xff
		h *= fnvPrime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
