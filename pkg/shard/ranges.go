package shard

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"strings"
)

// This file is the key space: which part of the 64-bit FNV-1a hash of a
// key each shard covers, and how that part is written for the API
// server's shardSelector.
//
// Kubernetes' server-side sharded list and watch (KEP-5866) filters
// objects by shardRange(field, start, end): it hashes the field's value
// with 64-bit FNV-1a and keeps the objects whose hash h has
// start <= h < end. Bounds are hexadecimal strings with a 0x prefix, 16
// digits for a 64-bit value ('0x0000000000000000', '0x8000000000000000'),
// and the end of the last range is '0x10000000000000000', one above the
// largest hash; several ranges are joined with ||. The supported fields
// are object.metadata.uid and object.metadata.namespace.

// MaxShards is the largest number of shards a group may have.
const MaxShards = 256

// Fields the API server can hash in a shardSelector (KEP-5866).
const (
	FieldUID       = "object.metadata.uid"
	FieldNamespace = "object.metadata.namespace"
)

// Hash is the 64-bit FNV-1a hash of key, the hash the API server computes
// for a shardSelector.
func Hash(key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key)) // a hash.Hash never fails to write
	return h.Sum64()
}

// Range is the part of the hash space one shard covers: every hash h with
// Start <= h < End, where End is 2^64 for the last shard (ToEnd set, End
// then 0). Ranges of the shards of a group never overlap and together
// cover every hash.
type Range struct {
	Start uint64
	End   uint64
	// ToEnd is set on the last shard's range, which ends at 2^64, a value
	// a uint64 cannot hold.
	ToEnd bool
}

// CheckCount returns an error unless n is a valid number of shards, 1 to
// MaxShards.
func CheckCount(n int) error {
	if n < 1 || n > MaxShards {
		return fmt.Errorf("the number of shards must be in [1, %d], got %d", MaxShards, n)
	}
	return nil
}

// RangeOf returns the range of shard i of n: the hashes h with
// i*2^64/n <= h < (i+1)*2^64/n, as real numbers. As integers the range
// starts at the ceiling of i*2^64/n, the first hash inside it.
func RangeOf(i, n int) (Range, error) {
	if err := CheckCount(n); err != nil {
		return Range{}, err
	}
	if i < 0 || i >= n {
		return Range{}, fmt.Errorf("shard %d does not exist: a group of %d shards has shards 0 to %d", i, n, n-1)
	}
	r := Range{Start: boundary(i, n)}
	if i == n-1 {
		r.ToEnd = true
	} else {
		r.End = boundary(i+1, n)
	}
	return r, nil
}

// boundary is the first hash of shard i of n (0 <= i < n): the ceiling of
// i*2^64/n.
func boundary(i, n int) uint64 {
	q, r := bits.Div64(uint64(i), 0, uint64(n)) // i*2^64 / n; i < n, so no overflow
	if r != 0 {
		q++
	}
	return q
}

// Of returns the shard of n that covers hash h: the i with
// i*2^64/n <= h < (i+1)*2^64/n, which is floor(h*n / 2^64). n must be
// valid (CheckCount); Of returns -1 otherwise.
func Of(h uint64, n int) int {
	if CheckCount(n) != nil {
		return -1
	}
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

// OfKey returns the shard of n that covers key's hash.
func OfKey(key string, n int) int { return Of(Hash(key), n) }

// Contains reports whether h falls in r.
func (r Range) Contains(h uint64) bool {
	return h >= r.Start && (r.ToEnd || h < r.End)
}

// StartText is r's start as a shardSelector bound: lowercase, 0x, 16
// hexadecimal digits.
func (r Range) StartText() string { return hex64(r.Start) }

// EndText is r's end as a shardSelector bound: lowercase, 0x, 16
// hexadecimal digits, or 0x10000000000000000 (2^64) for the last shard.
func (r Range) EndText() string {
	if r.ToEnd {
		return "0x10000000000000000"
	}
	return hex64(r.End)
}

func hex64(v uint64) string { return fmt.Sprintf("0x%016x", v) }

// Selector returns the shardSelector text that selects the objects whose
// field hashes into any of ranges: one shardRange per run of adjacent
// ranges, joined by " || ", in the order given. ok is false when ranges
// is empty: no selector selects nothing, and an empty selector would
// select everything, so a replica that holds no shard must not watch.
func Selector(field string, ranges []Range) (selector string, ok bool) {
	if len(ranges) == 0 {
		return "", false
	}
	var parts []string
	cur := ranges[0]
	flush := func() {
		parts = append(parts, fmt.Sprintf("shardRange(%s, '%s', '%s')", field, cur.StartText(), cur.EndText()))
	}
	for _, r := range ranges[1:] {
		if !cur.ToEnd && cur.End == r.Start {
			cur.End, cur.ToEnd = r.End, r.ToEnd
			continue
		}
		flush()
		cur = r
	}
	flush()
	return strings.Join(parts, " || "), true
}
