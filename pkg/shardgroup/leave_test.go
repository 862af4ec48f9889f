package shardgroup

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

// stopInBackground begins r's graceful stop and returns a channel that
// gets the instant Run returned.
func stopInBackground(t *testing.T, r *replica) <-chan time.Time {
	returned := make(chan time.Time, 1)
	go func() {
		r.stop(t)
		returned <- time.Now()
	}()
	return returned
}

// TestAStopWithoutStopDrainTimeoutReleasesAtOnce: a replica whose stop
// drain timeout is 0 (its app has stopped before it, as a native
// sidecar's has) leaves and releases every shard it holds without any
// acknowledgement, though its drain timeout while running is 20s: it
// holds nothing before a retry period has passed (in the same pass
// that drains them), and the other replica holds every shard before a
// retry period has passed too (the releases wake it to read the members
// again), never two claims of one shard.
func TestAStopWithoutStopDrainTimeoutReleasesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		const n = 6
		leaver := startWith(t, store, "a", n, time.Second, 20*time.Second, 0, 0)
		other := startWith(t, store, "b", n, time.Second, 20*time.Second, 0, 0)
		both := []*replica{leaver, other}
		s := newSampler()
		// Settling moves shards between the two by drains that nobody
		// acknowledges: the drain timeout, 20s, applies while running.
		awaitSettled(t, s, both, both, n, 40*time.Second)
		gone := heldBy(leaver)
		if len(gone) != n/2 {
			t.Fatalf("the leaver holds %v before its stop, want %d shards", gone, n/2)
		}
		before := leaver.g.Moves()

		start := time.Now()
		returned := stopInBackground(t, leaver)
		moved := awaitSettled(t, s, both, []*replica{other}, n, 4*testRetry)
		stoppedAfter := (<-returned).Sub(start)
		t.Logf("the leaver returned %v after its stop; shards %v held by the other %v after it", stoppedAfter, gone, moved)
		if stoppedAfter >= testRetry {
			t.Errorf("the leaver returned %v after its stop, want less than a retry period (%v)", stoppedAfter, testRetry)
		}
		if moved >= testRetry {
			t.Errorf("the other held the leaver's shards %v after its stop, want less than a retry period (%v)", moved, testRetry)
		}
		after := leaver.g.Moves()
		if d, r := after.DrainsStarted-before.DrainsStarted, after.Released-before.Released; d != int64(len(gone)) || r != int64(len(gone)) {
			t.Errorf("the leaver started %d drains and released %d shards, want %d each", d, r, len(gone))
		}
		if s.overlaps != 0 || s.regressions != 0 {
			t.Errorf("%d overlaps, %d token regressions in %d samples", s.overlaps, s.regressions, s.samples)
		}
	})
}

// TestAStopDrainTimeoutWaitsForTheAcknowledgement: with a stop drain
// timeout of 10s, a leaving replica keeps claiming each shard it drains,
// shown draining, until its application acknowledges it (5s after the
// stop here); then it releases them and the other replica takes them
// within a few retry periods, never two claims of one shard.
func TestAStopDrainTimeoutWaitsForTheAcknowledgement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		const n = 6
		leaver := startWith(t, store, "a", n, time.Second, time.Second, 10*time.Second, 0)
		other := startWith(t, store, "b", n, time.Second, time.Second, 10*time.Second, 0)
		both := []*replica{leaver, other}
		s := newSampler()
		awaitSettled(t, s, both, both, n, 30*time.Second)
		gone := heldBy(leaver)

		start := time.Now()
		returned := stopInBackground(t, leaver)
		for time.Since(start) < 5*time.Second {
			s.sample(t, both)
			time.Sleep(50 * time.Millisecond)
		}
		st := leaver.g.Status()
		if !st.Leaving || len(st.Held) != len(gone) {
			t.Fatalf("5s into its stop the leaver (leaving: %v) holds %+v, want its shards %v", st.Leaving, st.Held, gone)
		}
		for _, h := range st.Held {
			if !h.Draining {
				t.Errorf("5s into its stop shard %d is not shown draining", h.Shard)
			}
		}
		for _, i := range gone {
			if err := leaver.g.Drained(i, 0); err != nil {
				t.Errorf("Drained(%d): %v", i, err)
			}
		}
		moved := awaitSettled(t, s, both, []*replica{other}, n, 4*testRetry)
		stoppedAfter := (<-returned).Sub(start)
		t.Logf("acknowledged 5s after the stop; the leaver returned %v after its stop; shards %v held by the other %v after the acknowledgement", stoppedAfter, gone, moved)
		if stoppedAfter < 5*time.Second || stoppedAfter > 5*time.Second+testRetry {
			t.Errorf("the leaver returned %v after its stop, want within a retry period of the acknowledgement (5s)", stoppedAfter)
		}
		if moved >= testRetry {
			t.Errorf("the other held the leaver's shards %v after the acknowledgement, want less than a retry period (%v)", moved, testRetry)
		}
		if s.overlaps != 0 || s.regressions != 0 {
			t.Errorf("%d overlaps, %d token regressions in %d samples", s.overlaps, s.regressions, s.samples)
		}
	})
}

// TestTheMemberRecordKeepsItsJoinTime: a replica's renewals of its member
// record keep the time it joined as the record's acquire time, as a
// term's renewals keep its start, so that `sidecar status` shows how long
// the member has been in the group; each renewal still writes a new
// version and renew time, which are what the others judge it live by.
func TestTheMemberRecordKeepsItsJoinTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		startReplica(t, store, "r0", 2, time.Second, time.Second)
		member := store.Open(MemberRecord("g", "r0"))
		read := func() (backend.Record, backend.Version) {
			t.Helper()
			rec, v, err := member.Get(context.Background())
			if err != nil {
				t.Fatalf("reading the member record: %v", err)
			}
			return rec, v
		}
		time.Sleep(testRetry)
		joined, v := read()
		time.Sleep(3 * testRenew)
		renewed, w := read()
		if w == v || !renewed.RenewTime.After(joined.RenewTime) {
			t.Fatalf("the member record was not renewed in %v: version %s then %s, renewed %v then %v", 3*testRenew, v, w, joined.RenewTime, renewed.RenewTime)
		}
		if !renewed.AcquireTime.Equal(joined.AcquireTime) || renewed.HolderIdentity != "r0" {
			t.Errorf("after renewals the member record reads %+v, want the acquire time %v it joined at", renewed, joined.AcquireTime)
		}
	})
}
