package sim

import (
	"strings"
	"testing"
)

// Reads from a lagging view show the record as it was, with its version
// then: every decision the election takes on one is a compare-and-swap
// on that version, so every invariant holds. The views do lag: the
// candidates are shown tokens below ones they saw, and report them, more
// often than edits and deletions alone make them.
func TestStaleReadsKeepEveryInvariant(t *testing.T) {
	var stale, reports, reportsFresh int
	for seed := int64(1); seed <= 60; seed++ {
		r, err := Run(Options{Seed: seed, StaleReads: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", seed, r.Violations, strings.Join(r.Trace, "\n"))
		}
		fresh, err := Run(Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		stale, reports, reportsFresh = stale+r.StaleReads, reports+r.TokenRegressedReports, reportsFresh+fresh.TokenRegressedReports
	}
	if stale < 600 || reports <= reportsFresh {
		t.Fatalf("60 schedules: %d stale reads, %d reports of a token gone back (%d without stale reads): the views do not lag", stale, reports, reportsFresh)
	}
	t.Logf("60 schedules: %d stale reads; %d reports of a token gone back, %d without stale reads", stale, reports, reportsFresh)
}

// A store whose reads lag is a Lease's: it never proves a record was
// never created, whatever the seed.
func TestStaleReadsPlayALeaseStore(t *testing.T) {
	r, err := Run(Options{Seed: 1, StaleReads: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Trace[0], "proves a record never created false") {
		t.Fatalf("schedule 1 with stale reads: %s", r.Trace[0])
	}
}

// Requests refused with 429 are sent again after Retry-After until their
// timeout: some take effect late, some never, and every invariant holds.
func TestThrottlingKeepsEveryInvariant(t *testing.T) {
	var throttled, out int
	for seed := int64(1); seed <= 60; seed++ {
		r, err := Run(Options{Seed: seed, Throttling: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", seed, r.Violations, strings.Join(r.Trace, "\n"))
		}
		throttled, out = throttled+r.Throttled, out+r.ThrottledOut
	}
	if throttled < 300 || out < 60 || out*2 > throttled {
		t.Fatalf("60 schedules: %d tries refused, %d requests refused until their timeout: too few to test them", throttled, out)
	}
	t.Logf("60 schedules: %d tries refused with 429, %d requests refused until their timeout", throttled, out)
}

func TestServingFaultsOnlyInALoneElection(t *testing.T) {
	for _, o := range []Options{{Shards: 2, StaleReads: true}, {Shards: 2, Throttling: true}} {
		if _, err := Run(o); err == nil {
			t.Errorf("Run(%+v) accepted serving faults it does not play", o)
		}
	}
}
