package sim

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
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
// was not looking, a record of ours that we do not know we wrote, a token
// seen during a hand-off.)
func TestSchedulesKeepTheInvariants(t *testing.T) {
	// Schedules found before hand-offs existed replay without them.
	runs := []Options{
		// a first start's create, answered after its claim lapsed, landed after a deletion
		{Seed: 1930155, NoHandoffs: true},
		// a leader polling for an accept read a snapshot with a token raised
		// by hand, then recreated the deleted record below that token
		{Seed: 9080},
		// a leader saw, in a late snapshot, a token raised by hand before a
		// deletion, then transferred the next term at that token
		{Seed: 42517},
	}
	for seed := int64(1); seed <= 300; seed++ {
		runs = append(runs, Options{Seed: seed})
	}
	var handoffs, handedOff, stopped, hostile int
	for _, o := range runs {
		r, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", o.Seed, r.Violations, strings.Join(r.Trace, "\n"))
		}
		handoffs, handedOff, stopped = handoffs+r.Handoffs, handedOff+r.HandedOff, stopped+r.StoppedTargets
		hostile += r.HostileLeases
	}
	if hostile < 50 {
		t.Fatalf("300 schedules wrote %d hostile lease durations: too few to test them", hostile)
	}
	// The schedules do hand off, amid the other faults, and stop targets
	// right after their accepts.
	if handoffs < 100 || handedOff < 20 || stopped < 10 {
		t.Fatalf("300 schedules asked for %d hand-offs, %d handed off, %d targets stopped after accepting: too few to test them",
			handoffs, handedOff, stopped)
	}
	t.Logf("300 schedules: %d hand-offs asked for, %d handed off, %d targets stopped right after accepting; %d hostile lease durations written",
		handoffs, handedOff, stopped, hostile)
}

// A schedule's hand-offs, planned or on stop in a rolling update, come
// from streams of their own: a schedule without them is the one its seed
// drew before they existed, and NoHandoffs turns them off without
// changing anything else.
func TestHandoffsLeaveOtherSchedulesAsTheyWere(t *testing.T) {
	var with, without int
	for seed := int64(1); seed <= 40; seed++ {
		r, _ := Run(Options{Seed: seed})
		off, _ := Run(Options{Seed: seed, NoHandoffs: true})
		if off.Rollout {
			t.Fatalf("seed %d has a rolling update with NoHandoffs", seed)
		}
		if r.Handoffs == 0 && !r.Rollout {
			without++
			if !slices.Equal(r.Trace, off.Trace) {
				t.Fatalf("seed %d has no hand-offs, yet NoHandoffs changed its schedule", seed)
			}
			continue
		}
		with++
		if off.Handoffs != 0 {
			t.Fatalf("seed %d asked for %d hand-offs with NoHandoffs", seed, off.Handoffs)
		}
	}
	if with < 5 || without < 10 {
		t.Fatalf("of 40 seeds %d asked for hand-offs and %d none; want both kinds", with, without)
	}
}

// Clocks that drift apart by more than LeaseDuration/RenewDeadline allows
// do overlap, and the checker says so: it can fail. These seeds overlap
// with clocks within 40% of true time (the first four seeds that overlap
// on the current elector, played without hand-offs).
func TestClocksDriftingBeyondTheBoundOverlap(t *testing.T) {
	for _, seed := range []int64{517, 1029, 1147, 1739} {
		r, err := Run(Options{Seed: seed, Drift: 0.4, NoHandoffs: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Violations) == 0 || !strings.HasPrefix(r.Violations[0].What, "two leaders at once") {
			t.Errorf("seed %d with 40%% drift: violations %v, want two leaders at once", seed, r.Violations)
		}
	}
}

// The hostile lease durations are a fault the checker sees: candidates
// that trusted every record's lease duration (68 years, the longest a
// Lease declares) would leave the election without a leader long after
// faults stopped. These seeds are the first five that do.
func TestHostileLeasesBreakLivenessWithoutTheBound(t *testing.T) {
	for _, seed := range []int64{6, 22, 25, 32, 34} {
		unbounded, err := Run(Options{Seed: seed, TrustedRecordLease: math.MaxInt32 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(unbounded.Violations) == 0 || !strings.HasPrefix(unbounded.Violations[0].What, "no leader for") {
			t.Errorf("seed %d trusting every lease duration: violations %v, want no leader after faults stopped", seed, unbounded.Violations)
		}
		bounded, _ := Run(Options{Seed: seed})
		if len(bounded.Violations) > 0 || bounded.HostileLeases == 0 {
			t.Errorf("seed %d with the bound: %d hostile lease durations, violations %v; want some, and none",
				seed, bounded.HostileLeases, bounded.Violations)
		}
	}
}

// Schedules draw the leader's renew interval from the whole range
// election.ValidateRenewInterval accepts: the default, the largest
// (the fewest tries before demotion) and everything between.
func TestSchedulesDrawRenewIntervalsFromTheValidRange(t *testing.T) {
	o := Options{}.withDefaults()
	def := election.DefaultRenewInterval(o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
	largest := o.RenewDeadline - time.Duration(election.JitterFactor*float64(o.RetryPeriod))
	var defaults, nearLargest, below int
	for seed := int64(1); seed <= 300; seed++ {
		o.Seed = seed
		d := drawRenewInterval(o)
		if err := election.ValidateRenewInterval(d, o.RenewDeadline, o.RetryPeriod); err != nil {
			t.Fatalf("seed %d drew %v: %v", seed, d, err)
		}
		switch {
		case d == def:
			defaults++
		case d >= largest*9/10:
			nearLargest++
		case d < def:
			below++
		}
	}
	if defaults < 50 || nearLargest < 50 || below < 20 {
		t.Fatalf("300 schedules drew the default %d times, within 10%% of the largest (%v) %d times, below the default %d times",
			defaults, largest, nearLargest, below)
	}
}

// At the largest renew interval (7.6s - 1ns at the defaults) a failed
// renewal gets one retry before demotion; the invariants hold all the same.
func TestSchedulesAtTheLargestRenewIntervalKeepTheInvariants(t *testing.T) {
	largest := election.DefaultRenewDeadline - time.Duration(election.JitterFactor*float64(election.DefaultRetryPeriod)) - 1
	for seed := int64(1); seed <= 100; seed++ {
		r, err := Run(Options{Seed: seed, RenewInterval: largest})
		if err != nil {
			t.Fatal(err)
		}
		if r.RenewInterval != largest {
			t.Fatalf("seed %d ran with renew interval %v, want %v", seed, r.RenewInterval, largest)
		}
		if len(r.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", seed, r.Violations, strings.Join(r.Trace, "\n"))
		}
	}
}

func TestOptionsAreChecked(t *testing.T) {
	for _, o := range []Options{{TrustedRecordLease: 14e9}, {Candidates: -1}, {Drift: 1}, {Quiet: 3 * 60e9, Duration: 60e9}, {LeaseDuration: 1e9, RenewDeadline: 2e9, RetryPeriod: 1e9}, {RenewInterval: 8e9}} {
		if _, err := Run(o); err == nil {
			t.Errorf("Run(%+v) accepted bad options", o)
		}
	}
}

// A quarter of the schedules roll the candidates from one revision to
// another, each leader handing off on stop, some crashed as they stop:
// none breaks an invariant, every one ends (a crash during the stop's
// hand-off ends the bounds it runs under), and leaders stopped in them
// hand off, mostly to the new revision. Only the schedules of seeds 1 to
// 1,000 that roll out run.
func TestRollingUpdatesHandOffOnStop(t *testing.T) {
	var rollouts, stopped, handedOff, toOther, crashed int
	for seed := int64(1); seed <= 1000; seed++ {
		if _, ok := rollsOut(Options{Seed: seed}); !ok {
			continue
		}
		r, err := Run(Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", seed, r.Violations, strings.Join(r.Trace, "\n"))
		}
		if !r.Rollout {
			t.Fatalf("seed %d rolls out, yet its schedule had no rolling update", seed)
		}
		rollouts++
		stopped, handedOff, toOther, crashed = stopped+r.LeadersStopped, handedOff+r.StopHandedOff, toOther+r.StopToOtherRevision, crashed+r.CrashedStopping
	}
	if rollouts < 150 || stopped < 20 || handedOff < 5 || toOther < 3 || crashed < 10 {
		t.Fatalf("seeds 1 to 1,000: %d rolling updates, %d leaders stopped, %d handed off on stop, %d to the other revision, %d crashed stopping: too few to test them",
			rollouts, stopped, handedOff, toOther, crashed)
	}
	t.Logf("seeds 1 to 1,000: %d rolling updates, %d leaders stopped, %d handed off on stop, %d to the other revision, %d crashed stopping",
		rollouts, stopped, handedOff, toOther, crashed)
}
