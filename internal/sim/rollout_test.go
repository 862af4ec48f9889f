package sim

import (
	"strings"
	"testing"
)

// A StatefulSet's rolling updates (Options.StatefulSets), whose stopping
// leaders leave their release to their replacement, keep every invariant,
// and the release is taken in each of the three ways the rule allows: by
// the replacement, by a candidate of another revision, and by anyone once
// it has stood its wait. The counts are fixed by the seeds.
func TestStatefulSetRolloutsKeepEveryInvariant(t *testing.T) {
	var rollouts int
	var taken [3]int
	for seed := int64(1); seed <= 200; seed++ {
		r, err := Run(Options{Seed: seed, StatefulSets: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", seed, r.Violations, strings.Join(r.Trace, "\n"))
		}
		if r.StatefulSet {
			rollouts++
		}
		for i, n := range r.ReservedTaken {
			taken[i] += n
		}
	}
	if rollouts < 40 || taken[0] == 0 || taken[1] == 0 || taken[2] == 0 {
		t.Fatalf("200 schedules: %d StatefulSet rollouts, releases left to a replacement taken by it %d, by another revision %d, after the wait %d: want each",
			rollouts, taken[0], taken[1], taken[2])
	}
	t.Logf("200 schedules: %d StatefulSet rollouts; releases left to a replacement taken by it %d, by another revision %d, after the wait %d",
		rollouts, taken[0], taken[1], taken[2])
}
