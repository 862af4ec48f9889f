package process

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestFencedSetUnderFaults: three sidecars elect on one SQLite file; each
// replica's app appends ids of its own to one list in PostgreSQL while it
// believes its sidecar leads, checking its term with fence.SQLGuard in
// the transaction of the read-modify-write. A seeded nemesis pauses the
// leader's sidecar past the lease (its app keeps writing with the term it
// last heard: a stale leader) and kills sidecars, starting new ones in
// their place. Every acknowledged append is in the final list, no id is
// there twice or without an append that may have taken effect, the guard
// refused some appends (the stale leader existed), and porcupine finds the
// history linearizable as a list under atomic appends.
// LEADER_SIDECAR_JEPSEN_DURATION runs the nemesis longer (make jepsen),
// LEADER_SIDECAR_JEPSEN_SEED replays a seed.
func TestFencedSetUnderFaults(t *testing.T) {
	t.Parallel()
	seed, d := jepsenSeed(t), jepsenDuration(t)
	t.Logf("seed %d (LEADER_SIDECAR_JEPSEN_SEED), nemesis for %v", seed, d)
	r := newSetRun(t, "jepsen_fenced", true, 3)
	final := r.run(seed, d)
	v := r.check(final, 2*time.Minute)
	t.Logf("guard on: %v; faults %v", v, r.faults)
	if v.faults < 2 || v.acknowledged < 10 {
		t.Errorf("%d faults and %d acknowledged appends: too few to test anything", v.faults, v.acknowledged)
	}
	if v.refused == 0 {
		t.Errorf("the guard refused no append: the nemesis made no stale leader")
	}
	if v.lost != 0 || v.duplicated != 0 || v.phantom != 0 || v.linearizable != porcupine.Ok {
		t.Errorf("with the guard: %d lost, %d duplicated, %d phantom, porcupine %s; want 0, 0, 0, Ok", v.lost, v.duplicated, v.phantom, v.linearizable)
	}
}

// TestUnfencedSetLosesWrites is the unsafe baseline: the same run with
// the apps writing without the guard. The stale leader's appends
// interleave with the new leader's, so the checker finds a violation: an
// acknowledged append lost or doubled, or a history porcupine calls not
// linearizable. It shows that the nemesis makes the faults the guard
// must stop.
func TestUnfencedSetLosesWrites(t *testing.T) {
	t.Parallel()
	seed, d := jepsenSeed(t), jepsenDuration(t)
	t.Logf("seed %d (LEADER_SIDECAR_JEPSEN_SEED), nemesis for %v", seed, d)
	r := newSetRun(t, "jepsen_unfenced", false, 3)
	final := r.run(seed, d)
	v := r.check(final, 2*time.Minute)
	t.Logf("guard off: %v; faults %v", v, r.faults)
	if v.lost == 0 && v.duplicated == 0 && v.linearizable != porcupine.Illegal {
		t.Errorf("without the guard the checker found no violation (%v): the nemesis did not make a stale leader write", v)
	}
}
