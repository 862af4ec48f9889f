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
		{"a lone election", Options{}, seeds(1, 40), "f4973b0d87c45ff005b34c3b53045cd178a6d7f1d4457588e04a79a331cb1fbf"},
		// Each breaks an invariant: the violations and their traces
		// must come out the same too.
		{"a lone election with clocks beyond the bound", Options{Drift: 0.4, NoHandoffs: true}, []int64{619, 1029, 1147, 1692}, "a57241e0477422e3b6d8a7accac2d8c916ddfad0f65364edd636f279523c3cd0"},
		{"3 replicas over 8 shards", Options{Shards: 8, Candidates: 3}, seeds(1, 6), "3e770ff407fc80f7e3c81b34f795d7a44b40cf511b12c663b53ca39f4f9a8b9b"},
		{"3 replicas over 8 shards with clocks far beyond the bound", Options{Shards: 8, Candidates: 3, Drift: 0.8}, seeds(1, 3), "6908535c835ece6fd854f817bd6d771281726b8b7ee96a1cb11f0c88c47f039a"},
		{"5 replicas over 16 shards", Options{Shards: 16, Candidates: 5}, seeds(1, 2), "6f6576df141f7767839fcf2481bd702f18858a322d3fea0e20efd263b60abb11"},
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
