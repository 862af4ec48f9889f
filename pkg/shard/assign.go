package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
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
	ranked := make([]string, len(set))
	for i := range n {
		copy(ranked, set)
		rank(ranked, i)
		for _, m := range ranked {
			l := load[m]
			if l < floor || l == floor && atCeil < extra {
				t[i] = m
				load[m]++
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

// rank orders members for shard i: highest score first, ties (which need
// a 64-bit collision) by identity.
func rank(members []string, i int) {
	type scored struct {
		member string
		score  uint64
	}
	s := make([]scored, len(members))
	for j, m := range members {
		s[j] = scored{m, score(m, i)}
	}
	slices.SortFunc(s, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		case a.member < b.member:
			return -1
		case a.member > b.member:
			return 1
		}
		return 0
	})
	for j := range s {
		members[j] = s[j].member
	}
}

// score is the rendezvous weight of member for shard i: FNV-1a 64 of the
// member's identity and the shard's number, then mixed (the finalizer of
// SplitMix64) so that identities that differ in one character rank
// independently.
func score(member string, i int) uint64 {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(i))
	h := Hash(member + "\x00" + string(buf[:]))
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
