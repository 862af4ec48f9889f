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

// sampler asks every replica's Status, one after another, each time it
// wakes, and judges the claims by the order of those reads. A claim is an
// interval: from its first read to its last one a term is claimed. So a
// shard's term read as claimed after another read of a later term of the
// shard (a higher token) was claimed at once with it: an overlap. Two
// claims seen in one pass are not enough, as the replicas are read one
// after another and run between the reads (a holder that released after
// its read, a new holder that acquired before its own). A token claimed by
// two replicas counts as a regression.
type sampler struct {
	overlaps, regressions, samples int
	reads                          int                      // Status reads so far, in the order made
	claims                         map[int]map[int64]*claim // by shard and token
	reported                       map[[3]int64]bool
}

// claim is one term of a shard as the sampler read it: its holder, and
// the first and last reads that showed it.
type claim struct {
	holder      string
	first, last int
}

func newSampler() *sampler {
	return &sampler{claims: map[int]map[int64]*claim{}, reported: map[[3]int64]bool{}}
}

func (s *sampler) sample(t *testing.T, all []*replica) {
	t.Helper()
	s.samples++
	var problems []string
	for _, r := range all {
		problems = append(problems, s.read(r.id, r.g.Status().Held)...)
	}
	for _, p := range append(problems, s.judge()...) {
		t.Error(p)
	}
}

// read takes in one read of replica id's claims, and says each token it
// finds claimed by another replica too (a regression, counted once).
func (s *sampler) read(id string, held []Held) (problems []string) {
	s.reads++
	for _, h := range held {
		terms := s.claims[h.Shard]
		if terms == nil {
			terms = map[int64]*claim{}
			s.claims[h.Shard] = terms
		}
		c := terms[h.Token]
		switch {
		case c == nil:
			c = &claim{holder: id, first: s.reads}
			terms[h.Token] = c
		case c.holder != id && !s.reported[[3]int64{int64(h.Shard), h.Token, -1}]:
			s.reported[[3]int64{int64(h.Shard), h.Token, -1}] = true
			s.regressions++
			problems = append(problems, fmt.Sprintf("shard %d token %d claimed by %s and by %s", h.Shard, h.Token, c.holder, id))
		}
		c.last = s.reads
	}
	return problems
}

// judge says each overlap the reads so far show that it has not said
// yet, and counts it.
func (s *sampler) judge() (problems []string) {
	for i, terms := range s.claims {
		for k, c := range terms {
			for later, d := range terms {
				if later > k && c.last > d.first && !s.reported[[3]int64{int64(i), k, later}] {
					s.reported[[3]int64{int64(i), k, later}] = true
					s.overlaps++
					problems = append(problems, fmt.Sprintf("shard %d: token %d (%s) read as claimed after token %d (%s) was", i, k, c.holder, later, d.holder))
				}
			}
		}
	}
	return problems
}

// The sampler judges by the order of its reads: a holder read before it
// released and a new holder read after it acquired, in one pass, are no
// overlap; the old term read again after the new one was is one; and a
// token read from two replicas is a regression.
func TestTheSamplerJudgesClaimsByTheOrderOfItsReads(t *testing.T) {
	s := newSampler()
	held := func(token int64) []Held { return []Held{{Shard: 2, Token: token}} }
	s.read("r0", held(5))
	s.read("r1", held(6)) // r0 released and r1 acquired between the two reads
	if p := s.judge(); len(p) != 0 || s.overlaps != 0 {
		t.Errorf("a hand-off between two reads of one pass judged %v (%d overlaps), want none", p, s.overlaps)
	}
	s.read("r0", held(5)) // r0 still claims token 5 after token 6 was read
	if p := s.judge(); len(p) != 1 || s.overlaps != 1 {
		t.Errorf("the old term read after the new one judged %v (%d overlaps), want one overlap", p, s.overlaps)
	}
	if p := s.judge(); len(p) != 0 || s.overlaps != 1 {
		t.Errorf("judged again: %v (%d overlaps), want the overlap counted once", p, s.overlaps)
	}
	if p := s.read("r2", held(6)); len(p) != 1 || s.regressions != 1 {
		t.Errorf("token 6 read from r1 and r2: %v (%d regressions), want one regression", p, s.regressions)
	}
	s.read("r1", []Held{{Shard: 3, Token: 4}})
	s.read("r0", []Held{{Shard: 3, Token: 3}}) // a lower token read after a higher one
	if p := s.judge(); len(p) != 1 || s.overlaps != 2 {
		t.Errorf("token 3 read after token 4 of shard 3 judged %v (%d overlaps), want one more overlap", p, s.overlaps)
	}
}

// settled reports whether every replica in all sees exactly those
// replicas as members and every shard is claimed exactly once, as the
// table over them gives it. (The claims alone can match the table for a
// moment while a replica's view still lacks members it has not read yet.)
func settled(all []*replica, n int) bool {
	ids := make([]string, len(all))
	for i, r := range all {
		ids[i] = r.id
	}
	slices.Sort(ids)
	table, _ := shard.Assign(n, ids)
	held := make([][]string, n)
	for _, r := range all {
		st := r.g.Status()
		if !slices.Equal(st.Members, ids) {
			return false
		}
		for _, h := range st.Held {
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
			err := first.g.Drained(i, 0)
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
