package sim

import (
	"testing"
)

// Every seed plays today as it did when these digests were taken (by
// this test, on the simulator before it was made faster): the same
// events, terms, moves, violations and trace, schedule by schedule
// (Result.Summary). A change that makes the simulator faster must leave
// them as they are. A change to what schedules do (a new fault, a new
// check) changes them on purpose: take the new ones from this test's
// failure (hack/sim -summaries shows which seed differs) and say so in
// the commit.
func TestSchedulesPlayAsTheyDid(t *testing.T) {
	t.Parallel()
	seeds := func(from, to int64) []int64 {
		var out []int64
		for s := from; s <= to; s++ {
			out = append(out, s)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		opts  Options
		seeds []int64
		want  string
	}{
		{"a lone election", Options{}, seeds(1, 40), "9419ba8ac2dece1807a281f989b7814165905abccaa2b0c2de7065b2fb5187b7"},
		// Each breaks an invariant: the violations and their traces
		// must come out the same too.
		{"a lone election with clocks beyond the bound", Options{Drift: 0.4, NoHandoffs: true}, []int64{517, 1029, 1147, 1739}, "5fdc469de9df0ead1e34bce2ac0119e527dad271b87e1be758b6cda85cc1bbba"},
		{"3 replicas over 8 shards", Options{Shards: 8, Candidates: 3}, seeds(1, 6), "19d14545bfe1b83b6ca2d70c362a28e4034c0f6e43ae58a735fb3cb04e197c8f"},
		{"3 replicas over 8 shards with clocks far beyond the bound", Options{Shards: 8, Candidates: 3, Drift: 0.8}, seeds(1, 3), "6908535c835ece6fd854f817bd6d771281726b8b7ee96a1cb11f0c88c47f039a"},
		{"5 replicas over 16 shards", Options{Shards: 16, Candidates: 5}, seeds(1, 2), "893e5eb987785d011c6b4379128e0bf0dbae166a8ea7af5ccb6052cce9e1d485"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, broken := NewDigest(), 0
			for _, seed := range tc.seeds {
				o := tc.opts
				o.Seed = seed
				r, err := Run(o)
				if err != nil {
					t.Fatal(err)
				}
				d.Add(r)
				if len(r.Violations) > 0 {
					broken++
				}
			}
			if got := d.String(); got != tc.want {
				t.Errorf("seeds %v (%d broken): digest %s, want %s", tc.seeds, broken, got, tc.want)
			}
		})
	}
}
