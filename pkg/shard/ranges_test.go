package shard

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// Known 64-bit FNV-1a values (the first three are the reference vectors
// of the FNV test suite; all were computed apart from Go's hash/fnv).
func TestHashIsFNV1a64(t *testing.T) {
	for key, want := range map[string]uint64{
		"":                                     0xcbf29ce484222325,
		"a":                                    0xaf63dc4c8601ec8c,
		"foobar":                               0x85944171f73967e8,
		"b":                                    0xaf63df4c8601f1a5,
		"0e4b3c6a-5d2f-4e1b-9a7c-8f3e2d1c0b9a": 0x4691d0367cd0885c,
	} {
		if got := Hash(key); got != want {
			t.Errorf("Hash(%q) = %#016x, want %#016x", key, got, want)
		}
	}
}

// The definition, in exact arithmetic: the first hash of shard i
// of n is the ceiling of i*2^64/n.
func exactStart(i, n int) *big.Int {
	num := new(big.Int).Lsh(big.NewInt(int64(i)), 64)
	num.Add(num, big.NewInt(int64(n-1)))
	return num.Div(num, big.NewInt(int64(n)))
}

// For every n from 1 to 256, the ranges start where exact arithmetic says,
// follow each other without gap or overlap, end at 2^64, and Of puts each
// boundary hash, and the hash just below it, on the right side.
func TestRangesTileTheHashSpaceExactly(t *testing.T) {
	for n := 1; n <= MaxShards; n++ {
		var prevEnd uint64
		for i := range n {
			r, err := RangeOf(i, n)
			if err != nil {
				t.Fatalf("RangeOf(%d, %d): %v", i, n, err)
			}
			if want := exactStart(i, n); r.Start != want.Uint64() || !want.IsUint64() {
				t.Fatalf("shard %d of %d starts at %#x, want %v", i, n, r.Start, want)
			}
			if i > 0 && r.Start != prevEnd {
				t.Fatalf("shard %d of %d starts at %#x, the previous one ends at %#x", i, n, r.Start, prevEnd)
			}
			if r.ToEnd != (i == n-1) {
				t.Fatalf("shard %d of %d: ToEnd %v", i, n, r.ToEnd)
			}
			if !r.ToEnd && r.End <= r.Start {
				t.Fatalf("shard %d of %d is empty: [%#x, %#x)", i, n, r.Start, r.End)
			}
			if got := Of(r.Start, n); got != i {
				t.Fatalf("Of(%#x, %d) = %d, want %d (the first hash of shard %d)", r.Start, n, got, i, i)
			}
			if i > 0 {
				if got := Of(r.Start-1, n); got != i-1 {
					t.Fatalf("Of(%#x, %d) = %d, want %d (the last hash of shard %d)", r.Start-1, n, got, i-1, i-1)
				}
			}
			if !r.Contains(r.Start) || i > 0 && r.Contains(r.Start-1) {
				t.Fatalf("shard %d of %d: Contains disagrees with its start %#x", i, n, r.Start)
			}
			prevEnd = r.End
		}
		if got := Of(math.MaxUint64, n); got != n-1 {
			t.Fatalf("Of(2^64-1, %d) = %d, want the last shard", n, got)
		}
	}
}

// Every key falls in exactly one shard: the one Of names, and no other
// range contains its hash.
func TestEveryKeyFallsInExactlyOneShard(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 7, 8, 100, 255, 256} {
		ranges := make([]Range, n)
		for i := range n {
			ranges[i], _ = RangeOf(i, n)
		}
		for k := range 2000 {
			var key string
			if k%2 == 0 {
				key = randomUID(rng)
			} else {
				key = strings.Repeat("x", k%40)
			}
			h := Hash(key)
			var in []int
			for i, r := range ranges {
				if r.Contains(h) {
					in = append(in, i)
				}
			}
			if len(in) != 1 || in[0] != OfKey(key, n) {
				t.Fatalf("key %q (hash %#x) of %d shards is in ranges %v, OfKey says %d", key, h, n, in, OfKey(key, n))
			}
		}
	}
}

func randomUID(rng *rand.Rand) string {
	const hexDigits = "0123456789abcdef"
	var b strings.Builder
	for i := range 36 {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			b.WriteByte('-')
			continue
		}
		b.WriteByte(hexDigits[rng.IntN(16)])
	}
	return b.String()
}

func TestRangesAreWrittenAsTheAPIServerWantsThem(t *testing.T) {
	for _, c := range []struct {
		i, n       int
		start, end string
	}{
		{0, 1, "0x0000000000000000", "0x10000000000000000"},
		{0, 2, "0x0000000000000000", "0x8000000000000000"},
		{1, 2, "0x8000000000000000", "0x10000000000000000"},
		{1, 3, "0x5555555555555556", "0xaaaaaaaaaaaaaaab"},
		{2, 3, "0xaaaaaaaaaaaaaaab", "0x10000000000000000"},
		{3, 7, "0x6db6db6db6db6db7", "0x924924924924924a"},
		{1, 256, "0x0100000000000000", "0x0200000000000000"},
		{255, 256, "0xff00000000000000", "0x10000000000000000"},
	} {
		r, err := RangeOf(c.i, c.n)
		if err != nil {
			t.Fatal(err)
		}
		if r.StartText() != c.start || r.EndText() != c.end {
			t.Errorf("shard %d of %d is [%s, %s), want [%s, %s)", c.i, c.n, r.StartText(), r.EndText(), c.start, c.end)
		}
	}
}

func TestSelectorJoinsAdjacentRanges(t *testing.T) {
	of := func(n int, shards ...int) []Range {
		var out []Range
		for _, i := range shards {
			r, _ := RangeOf(i, n)
			out = append(out, r)
		}
		return out
	}
	for _, c := range []struct {
		ranges []Range
		want   string
	}{
		{of(2, 0), "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"},
		{of(4, 2, 3), "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"},
		{of(4, 0, 2), "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || " +
			"shardRange(object.metadata.uid, '0x8000000000000000', '0xc000000000000000')"},
		{of(3, 0, 1, 2), "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"},
	} {
		got, ok := Selector(FieldUID, c.ranges)
		if !ok || got != c.want {
			t.Errorf("Selector(%v) = %q, %v; want %q", c.ranges, got, ok, c.want)
		}
	}
	if s, ok := Selector(FieldNamespace, nil); ok || s != "" {
		t.Errorf("Selector of no range = %q, %v; want \"\", false: an empty selector selects everything", s, ok)
	}
}

func TestBadCountsAreRefused(t *testing.T) {
	for _, c := range []struct{ i, n int }{{0, 0}, {0, 257}, {-1, 4}, {4, 4}} {
		if _, err := RangeOf(c.i, c.n); err == nil {
			t.Errorf("RangeOf(%d, %d) accepted it", c.i, c.n)
		}
	}
	if Of(1, 0) != -1 || Of(1, 257) != -1 {
		t.Error("Of accepted a bad count")
	}
}
