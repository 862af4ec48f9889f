package sim

import (
	"slices"
	"strings"
	"testing"
)

// A store that restarts loses nothing: the requests on their way when it
// goes down fail, some having taken effect, and every invariant holds.
func TestStoreRestartsKeepEveryInvariant(t *testing.T) {
	var restarts, severed, committed int
	for seed := int64(1); seed <= 200; seed++ {
		r, err := Run(Options{Seed: seed, StoreRestarts: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", seed, r.Violations, strings.Join(r.Trace, "\n"))
		}
		if r.Failovers != 0 || r.LostWrites != 0 {
			t.Fatalf("seed %d: %d failovers losing %d writes, with restarts only", seed, r.Failovers, r.LostWrites)
		}
		restarts, severed, committed = restarts+r.StoreRestarts, severed+r.Severed, committed+r.CommittedAtCrash
	}
	if restarts < 200 || severed < 50 || committed < 20 || committed == severed {
		t.Fatalf("200 schedules: %d restarts, %d requests cut off, %d of them committed: too few to test them", restarts, severed, committed)
	}
	t.Logf("200 schedules: %d restarts, %d requests cut off, %d of them committed", restarts, severed, committed)
}

// Seed 7's failover strikes right after c6's acquire of token 2 and
// loses it; c6 claimed it and wrote to the guard meanwhile, and c8, which
// never saw it, is handed token 2 again. The checker counts it and lets
// it be, and the guard refuses c8's writes (fence.ErrTokenReused): no
// violation. The guard that accepts them (the mutant
// fence-memory-equal-token-after-failover) is caught at this seed.
func TestFailoverHandsALostTokenTwice(t *testing.T) {
	r, err := Run(Options{Seed: 7, Failovers: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Violations) > 0 {
		t.Fatalf("%v\n%s", r.Violations, strings.Join(r.Trace, "\n"))
	}
	if r.Failovers < 1 || r.LostWrites < 1 || r.TokensHandedTwice < 1 {
		t.Fatalf("%d failovers losing %d writes, %d tokens handed out twice; want some of each", r.Failovers, r.LostWrites, r.TokensHandedTwice)
	}
	if !slices.ContainsFunc(r.Trace, func(line string) bool {
		return strings.HasSuffix(line, "token 2 handed out twice: to c6, whose term a failover lost, and to c8")
	}) {
		t.Fatalf("no token 2 handed out twice to c6 and c8 in the trace:\n%s", strings.Join(r.Trace, "\n"))
	}
}

// Over a range, lossy failovers hand tokens out twice, and only the
// invariants they may bend, for the terms they affect, bend: no
// violation.
func TestFailoversKeepTheInvariantsTheyDoNotBend(t *testing.T) {
	var failovers, lost, twice int
	for seed := int64(1); seed <= 300; seed++ {
		r, err := Run(Options{Seed: seed, Failovers: true, StoreRestarts: seed%2 == 0})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", seed, r.Violations, strings.Join(r.Trace, "\n"))
		}
		failovers, lost, twice = failovers+r.Failovers, lost+r.LostWrites, twice+r.TokensHandedTwice
	}
	if failovers < 300 || lost < 300 || twice < 20 {
		t.Fatalf("300 schedules: %d failovers, %d writes lost, %d tokens handed out twice: too few to test them", failovers, lost, twice)
	}
	t.Logf("300 schedules: %d failovers, %d writes lost, %d tokens handed out twice", failovers, lost, twice)
}

// The election tells records apart by their versions: a failover that
// hands out again the versions it lost (an etcd backup restored without
// --bump-revision) lets a candidate take a new record for one it saw
// before, and miss its token. Seed 29's c4 saw its own lost create at
// version 4, then c3's record at version 4 again, and started a term
// with token 2, which c3 held: beyond what a failover that issues new
// versions does, and the checker says so.
func TestFailoversThatReissueVersionsHandTokensTwiceBeyondTheLostTerms(t *testing.T) {
	r, err := Run(Options{Seed: 29, Failovers: true, ReissueVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Violations) == 0 || !strings.HasPrefix(r.Violations[0].What, "c4 started a term with token 2 after it had seen token 2") {
		t.Fatalf("violations %v, want c4 starting a term with token 2 after it had seen it", r.Violations)
	}
	fresh, _ := Run(Options{Seed: 29, Failovers: true})
	if len(fresh.Violations) > 0 {
		t.Fatalf("with new versions after the failover: %v", fresh.Violations)
	}
}

func TestStoreFaultsOnlyInALoneElection(t *testing.T) {
	for _, o := range []Options{{Shards: 2, StoreRestarts: true}, {Shards: 2, Failovers: true}, {ReissueVersions: true}} {
		if _, err := Run(o); err == nil {
			t.Errorf("Run(%+v) accepted store faults it does not play", o)
		}
	}
}
