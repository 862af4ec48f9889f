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
		{"a lone election", Options{}, seeds(1, 40), "fab50b4e718306d45cdfcaca0f5337aead477bb2fc97844d674110a07f9ea4e4"},
		// Each breaks an invariant: the violations and their traces
		// must come out the same too.
		{"a lone election with clocks beyond the bound", Options{Drift: 0.4, NoHandoffs: true}, []int64{517, 1029, 1147, 1739}, "5fdc469de9df0ead1e34bce2ac0119e527dad271b87e1be758b6cda85cc1bbba"},
		{"3 replicas over 8 shards", Options{Shards: 8, Candidates: 3}, seeds(1, 6), "b48f1e669be614b5e857f9bb4a61752c5439d4aa9b323ecd07e8e602c696ec4e"},
		{"3 replicas over 8 shards with clocks far beyond the bound", Options{Shards: 8, Candidates: 3, Drift: 0.8}, seeds(1, 3), "fcf5dc189e6c8768c975dec11237b67a4eedb5f39d069abc1154b13d1c47a814"},
		{"5 replicas over 16 shards", Options{Shards: 16, Candidates: 5}, seeds(1, 2), "0d20772a41ff2f2489dbfbca1cb83aa49728862b8aca8e9868b69d403bf1385b"},
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
