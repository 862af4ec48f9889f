package sim

import (
	"slices"
	"strings"
	"testing"
)

func TestAScheduleReplaysExactly(t *testing.T) {
	first, err := Run(Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Run(Options{Seed: 7})
	if first.Events != again.Events || !slices.Equal(first.Trace, again.Trace) {
		t.Fatalf("seed 7 ran %d then %d events; traces equal: %v", first.Events, again.Events, slices.Equal(first.Trace, again.Trace))
	}
	if first.Events < 100 || first.Terms < 1 {
		t.Fatalf("seed 7: %d events, %d terms: the schedule did not run", first.Events, first.Terms)
	}
}

// Within the drift the package doc tolerates, no schedule breaks an
// invariant. (The violations the simulator found are regression tests of
// package election's rules: a record created and deleted while a standby
// was not looking, a record of ours that we do not know we wrote.)
func TestSchedulesKeepTheInvariants(t *testing.T) {
	seeds := []int64{
		1930155, // a first start's create, answered after its claim lapsed, landed after a deletion
	}
	for s := int64(1); s <= 300; s++ {
		seeds = append(seeds, s)
	}
	for _, seed := range seeds {
		r, err := Run(Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", seed, r.Violations, strings.Join(r.Trace, "\n"))
		}
	}
}

// Clocks that drift apart by more than LeaseDuration/RenewDeadline allows
// do overlap, and the checker says so: it can fail. These seeds overlap
// with clocks within 40% of true time.
func TestClocksDriftingBeyondTheBoundOverlap(t *testing.T) {
	for _, seed := range []int64{95, 139, 227, 880} {
		r, err := Run(Options{Seed: seed, Drift: 0.4})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Violations) == 0 || !strings.HasPrefix(r.Violations[0].What, "two leaders at once") {
			t.Errorf("seed %d with 40%% drift: violations %v, want two leaders at once", seed, r.Violations)
		}
	}
}

func TestOptionsAreChecked(t *testing.T) {
	for _, o := range []Options{{Candidates: -1}, {Drift: 1}, {Quiet: 3 * 60e9, Duration: 60e9}, {LeaseDuration: 1e9, RenewDeadline: 2e9, RetryPeriod: 1e9}} {
		if _, err := Run(o); err == nil {
			t.Errorf("Run(%+v) accepted bad options", o)
		}
	}
}
