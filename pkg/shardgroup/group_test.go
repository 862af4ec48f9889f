package shardgroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

// Test timings, on synctest's clock.
const (
	testLease = 3 * time.Second
	testRenew = 2 * time.Second
	testRetry = 500 * time.Millisecond
)

// replica is one running Group of a test.
type replica struct {
	id     string
	g      *Group
	cancel context.CancelFunc
	done   chan error
}

// startReplica starts a replica of group "g" with n shards on store; its
// stop drain timeout is its drain timeout.
func startReplica(t *testing.T, store *memory.Store, id string, n int, rebalance, drain time.Duration) *replica {
	t.Helper()
	return startWith(t, store, id, n, rebalance, drain, drain, 0)
}

// startCapped is startReplica with a MaxPerMember.
func startCapped(t *testing.T, store *memory.Store, id string, n int, rebalance, drain time.Duration, maxPer int) *replica {
	t.Helper()
	return startWith(t, store, id, n, rebalance, drain, drain, maxPer)
}

// startWith starts a replica with every timing of its moves given.
func startWith(t *testing.T, store *memory.Store, id string, n int, rebalance, drain, stopDrain time.Duration, maxPer int) *replica {
	t.Helper()
	shards := make([]backend.Backend, n)
	for i := range shards {
		shards[i] = store.Open(ShardRecord("g", i))
	}
	member := store.Open(MemberRecord("g", id))
	g, err := New(Config{
		Group: "g", Identity: id, Shards: shards, Member: member, Members: member,
		Election:       election.Config{LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry, Logger: slog.New(slog.DiscardHandler)},
		RebalanceDelay: rebalance, DrainTimeout: drain, StopDrainTimeout: stopDrain, MaxPerMember: maxPer,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{id: id, g: g, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- g.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop is a graceful stop; it waits for Run to return.
func (r *replica) stop(t *testing.T) {
	r.cancel()
	if err := <-r.done; err != nil {
		t.Errorf("%s: Run: %v", r.id, err)
	}
	r.done <- nil // a second stop returns at once
}

// sampler asks every replica's Status at each instant it wakes and
// counts, per shard, instants where two replicas claim it, and claims
// whose token goes back or repeats with another holder.
type sampler struct {
	overlaps, regressions, samples int
	last                           map[int]int64
	holderOf                       map[[2]int64]string
}

func newSampler() *sampler {
	return &sampler{last: map[int]int64{}, holderOf: map[[2]int64]string{}}
}

func (s *sampler) sample(t *testing.T, all []*replica) {
	s.samples++
	claims := map[int][]string{}
	for _, r := range all {
		for _, h := range r.g.Status().Held {
			claims[h.Shard] = append(claims[h.Shard], r.id)
			key := [2]int64{int64(h.Shard), h.Token}
			if prev, ok := s.holderOf[key]; ok && prev != r.id {
				s.regressions++
				t.Errorf("shard %d token %d claimed by %s and by %s", h.Shard, h.Token, prev, r.id)
			}
			s.holderOf[key] = r.id
			if h.Token < s.last[h.Shard] {
				s.regressions++
				t.Errorf("shard %d: %s claims token %d after %d was claimed", h.Shard, r.id, h.Token, s.last[h.Shard])
			}
			s.last[h.Shard] = max(s.last[h.Shard], h.Token)
		}
	}
	for i, c := range claims {
		if len(c) > 1 {
			s.overlaps++
			t.Errorf("shard %d claimed at once by %v", i, c)
		}
	}
}

// settled reports whether every shard is claimed exactly once, as the
// table over the replicas in all gives it.
func settled(all []*replica, n int) bool {
	ids := make([]string, len(all))
	for i, r := range all {
		ids[i] = r.id
	}
	table, _ := shard.Assign(n, ids)
	held := make([][]string, n)
	for _, r := range all {
		for _, h := range r.g.Status().Held {
			held[h.Shard] = append(held[h.Shard], r.id)
		}
	}
	for i := range n {
		if len(held[i]) != 1 || held[i][0] != table[i] {
			return false
		}
	}
	return true
}

// awaitSettled samples every 50ms until settled, and fails after within.
func awaitSettled(t *testing.T, s *sampler, sampled, all []*replica, n int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		s.sample(t, sampled)
		if settled(all, n) {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("not settled after %v", within)
	return 0
}

func heldBy(r *replica) []int {
	var out []int
	for _, h := range r.g.Status().Held {
		out = append(out, h.Shard)
	}
	return out
}

// TestThreeReplicasConvergeAndAGracefulStopMovesItsShards: 3 replicas
// over 8 shards, started together, each shard held once as the table
// gives it (at most 3 each); one stops gracefully and the other two hold
// its shards within a few retry periods; never two claims of one shard.
func TestThreeReplicasConvergeAndAGracefulStopMovesItsShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		const n = 8
		var all []*replica
		for i := range 3 {
			all = append(all, startReplica(t, store, fmt.Sprintf("r%d", i), n, time.Second, time.Second))
		}
		s := newSampler()
		took := awaitSettled(t, s, all, all, n, 30*time.Second)
		for _, r := range all {
			if got := len(heldBy(r)); got > shard.FairShare(n, 3) {
				t.Errorf("%s holds %d shards, above ceil(8/3)", r.id, got)
			}
			if st := r.g.Status(); len(st.Members) != 3 || st.FairShare != 3 {
				t.Errorf("%s sees members %v, fair share %d; want 3 members, 3", r.id, st.Members, st.FairShare)
			}
		}
		t.Logf("settled after %v", took)

		leaver := all[0]
		gone := heldBy(leaver)
		leaverBefore := leaver.g.Moves()
		acquiredBefore := all[1].g.Moves().Acquired + all[2].g.Moves().Acquired
		stopped := make(chan struct{})
		go func() { leaver.stop(t); close(stopped) }()
		rest := all[1:]
		moved := awaitSettled(t, s, all, rest, n, 4*testRetry+time.Second)
		<-stopped
		t.Logf("shards %v moved within %v of the graceful stop", gone, moved)
		// The leaver drained and released each of its shards once, and the
		// other two began one term for each.
		after := leaver.g.Moves()
		if d, r := after.DrainsStarted-leaverBefore.DrainsStarted, after.Released-leaverBefore.Released; d != int64(len(gone)) || r != int64(len(gone)) {
			t.Errorf("the leaver started %d drains and released %d shards, want %d each", d, r, len(gone))
		}
		if got := all[1].g.Moves().Acquired + all[2].g.Moves().Acquired - acquiredBefore; got != int64(len(gone)) {
			t.Errorf("the others began %d terms, want %d (the leaver's shards)", got, len(gone))
		}
		if s.overlaps != 0 || s.regressions != 0 {
			t.Errorf("%d overlaps, %d token regressions in %d samples", s.overlaps, s.regressions, s.samples)
		}
	})
}

// TestADrainWaitsForTheAcknowledgement: a replica that holds every shard
// drains the newcomer's share once it has been live for the rebalance
// delay, keeps claiming each draining shard until its application
// acknowledges it (the drain timeout, 20s, is not reached), then releases it and the
// newcomer takes it at once.
func TestADrainWaitsForTheAcknowledgement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		const n = 4
		first := startReplica(t, store, "a", n, 2*time.Second, 20*time.Second)
		s := newSampler()
		awaitSettled(t, s, []*replica{first}, []*replica{first}, n, 10*time.Second)
		second := startReplica(t, store, "b", n, 2*time.Second, 20*time.Second)
		both := []*replica{first, second}

		time.Sleep(2*time.Second + 2*testRetry)
		var draining []int
		for _, h := range first.g.Status().Held {
			if h.Draining {
				draining = append(draining, h.Shard)
			}
		}
		if len(draining) != 2 {
			t.Fatalf("draining %v, want the 2 shards of the newcomer's share (holding %v)", draining, heldBy(first))
		}
		time.Sleep(10 * time.Second)
		if got := len(heldBy(first)); got != n {
			t.Fatalf("the first replica holds %d shards before any acknowledgement, want %d", got, n)
		}
		for i := range n {
			err := first.g.Drained(i)
			if want := slices.Contains(draining, i); want && err != nil || !want && !errors.Is(err, ErrNotDraining) {
				t.Errorf("Drained(%d) (draining: %v): %v", i, want, err)
			}
		}
		took := awaitSettled(t, s, both, both, n, 3*testRetry)
		t.Logf("moved %v within %v of the acknowledgement", draining, took)
		if got, want := first.g.Moves(), (Moves{Acquired: n, DrainsStarted: 2, Released: 2}); got != want {
			t.Errorf("the first replica's moves %+v, want %+v", got, want)
		}
		if got, want := second.g.Moves(), (Moves{Acquired: 2}); got != want {
			t.Errorf("the newcomer's moves %+v, want %+v", got, want)
		}
	})
}

// TestMaxPerMemberCapsWhatAReplicaTakes: alone, a replica's fair share is
// every shard, but with MaxPerMember 3 it holds 3 of 8 and leaves the
// rest free; a second replica, capped alike, takes 3 more.
func TestMaxPerMemberCapsWhatAReplicaTakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		const n = 8
		a := startCapped(t, store, "a", n, time.Second, time.Second, 3)
		time.Sleep(5 * time.Second)
		if got := heldBy(a); len(got) != 3 {
			t.Fatalf("a holds %v alone with a cap of 3", got)
		}
		b := startCapped(t, store, "b", n, time.Second, time.Second, 3)
		time.Sleep(10 * time.Second)
		if ga, gb := heldBy(a), heldBy(b); len(ga) != 3 || len(gb) != 3 || slices.ContainsFunc(ga, func(i int) bool { return slices.Contains(gb, i) }) {
			t.Fatalf("a holds %v, b holds %v; want 3 each, none twice", ga, gb)
		}
	})
}
