package shardgroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

// rangeSampler reads every replica's Status in turn, numbering the reads,
// acknowledges the drains it sees, and keeps each term (replica, count,
// shard, token) with the first and last read that showed it held. A term
// is contiguous, so two terms whose spans of reads intersect were held at
// one instant (the reads are numbered one after another, never two at
// once); when their key ranges intersect too, two replicas held the same
// keys at once.
type rangeSampler struct {
	seq   int
	terms map[rangeTerm]*[2]int
}

type rangeTerm struct {
	id           string
	count, shard int
	token        int64
}

func newRangeSampler() *rangeSampler { return &rangeSampler{terms: map[rangeTerm]*[2]int{}} }

func (s *rangeSampler) sample(all []*replica) {
	for _, r := range all {
		st := r.g.Status()
		s.seq++
		for _, h := range st.Held {
			k := rangeTerm{r.id, st.Shards, h.Shard, h.Token}
			if span, ok := s.terms[k]; ok {
				span[1] = s.seq
			} else {
				s.terms[k] = &[2]int{s.seq, s.seq}
			}
			if h.Draining {
				_ = r.g.Drained(h.Shard, h.Token)
			}
		}
	}
}

// overlaps are the pairs of terms of two replicas that held the same keys
// at once.
func (s *rangeSampler) overlaps() []string {
	var keys []rangeTerm
	for k := range s.terms {
		keys = append(keys, k)
	}
	var out []string
	for i, a := range keys {
		for _, b := range keys[i+1:] {
			sa, sb := s.terms[a], s.terms[b]
			if a.id == b.id || sa[0] > sb[1] || sb[0] > sa[1] {
				continue
			}
			ra, _ := shard.RangeOf(a.shard, a.count)
			rb, _ := shard.RangeOf(b.shard, b.count)
			if ra.Contains(rb.Start) || rb.Contains(ra.Start) {
				out = append(out, fmt.Sprintf("%s held shard %d of %d (token %d) while %s held shard %d of %d (token %d)",
					a.id, a.shard, a.count, a.token, b.id, b.shard, b.count, b.token))
			}
		}
	}
	return out
}

// heldShards is the number of shards r holds now.
func heldShards(r *replica) int { return len(r.g.Status().Held) }

// TestACountChangeNeverHoldsAKeyTwice plays rolling updates of the shard
// count with every replica's Status read every 50ms: two replicas of the
// old count hold every shard, one of the new count joins, then the old
// ones stop (or, when the count grew, the new one stops: a rollout
// abandoned). No key is ever held by two replicas at once; the larger
// count takes every shard while the smaller one still runs (the smaller
// yields), and once the replicas of one count are gone, the other holds
// every shard of its count within a few retry periods.
func TestACountChangeNeverHoldsAKeyTwice(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to int
		stopNew  bool
	}{
		{"2 to 4", 2, 4, false},
		{"4 to 2", 4, 2, false},
		{"2 to 4 abandoned", 2, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memory.NewStore()
				old := []*replica{startReplica(t, store, "old-a", tc.from, time.Second, 10*time.Second),
					startReplica(t, store, "old-b", tc.from, time.Second, 10*time.Second)}
				var mu sync.Mutex
				all := slices.Clone(old)
				s := newRangeSampler()
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					for {
						select {
						case <-stop:
							return
						case <-time.After(50 * time.Millisecond):
							mu.Lock()
							s.sample(all)
							mu.Unlock()
						}
					}
				}()
				holds := func(rs []*replica) int {
					n := 0
					for _, r := range rs {
						n += heldShards(r)
					}
					return n
				}
				time.Sleep(5 * time.Second)
				if got := holds(old); got != tc.from {
					t.Fatalf("the old replicas hold %d shards, want all %d", got, tc.from)
				}
				newer := startReplica(t, store, "new", tc.to, time.Second, 10*time.Second)
				mu.Lock()
				all = append(all, newer)
				mu.Unlock()
				time.Sleep(4 * testLease)
				switch {
				case tc.to > tc.from && (heldShards(newer) != tc.to || holds(old) != 0):
					t.Errorf("the larger new count holds %d of %d shards, the old %d: want every shard moved to it", heldShards(newer), tc.to, holds(old))
				case tc.to < tc.from && (heldShards(newer) != 0 || holds(old) != tc.from):
					t.Errorf("the smaller new count holds %d shards, the old %d of %d: want the new one to wait", heldShards(newer), holds(old), tc.from)
				}
				stopped, rest, count := old, []*replica{newer}, tc.to
				if tc.stopNew {
					stopped, rest, count = []*replica{newer}, old, tc.from
				}
				for _, r := range stopped {
					r.stop(t)
				}
				deadline := time.Now().Add(3 * testLease)
				for holds(rest) != count && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if got := holds(rest); got != count {
					t.Errorf("%d of %d shards held by the replicas left, %v after the others stopped", got, count, 3*testLease)
				}
				close(stop)
				<-done
				if o := s.overlaps(); len(o) != 0 {
					t.Errorf("keys held twice at once:\n%s", strings.Join(o, "\n"))
				}
				t.Logf("%d reads of Status, %d terms seen", s.seq, len(s.terms))
			})
		})
	}
}

// TestTheGateRefusesATermTheReplicaMayNotTake drives one replica's member
// writes and lists by hand: an elector's write that would begin a term
// here passes only while the replica may take shards: after its member
// record was written and a list began after that write, while that write
// is within a renew deadline, and while no larger count is live; a write
// after a gap of a renew deadline (a pause, a stalled store) needs a list
// after it again; a renewal of a term it claims and a write naming
// another always pass.
func TestTheGateRefusesATermTheReplicaMayNotTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		shards := []backend.Backend{store.Open(ShardRecord("g", 0)), store.Open(ShardRecord("g", 1))}
		member := store.Open(MemberRecord("g", "a"))
		g, err := New(Config{Group: "g", Identity: "a", Shards: shards, Member: member, Members: member,
			Election: election.Config{LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry, Logger: slog.New(slog.DiscardHandler)}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		mine := backend.Record{HolderIdentity: "a", LeaseDurationSeconds: 3, Transitions: 1}
		step := func(what string, want error) {
			t.Helper()
			if err := g.gate(0, mine); !errors.Is(err, want) {
				t.Errorf("%s: gate %v, want %v", what, err, want)
			}
		}
		step("before anything", errNotTaking)
		if err := g.gate(0, backend.Record{HolderIdentity: "b"}); err != nil {
			t.Errorf("a write naming another: %v", err)
		}
		_ = g.writeMember(ctx, "a", false, false)
		step("member written, no list since", errNotTaking)
		g.readMembers(ctx)
		step("member written, then listed", nil)
		time.Sleep(testRenew)
		step("member written a renew deadline ago", errNotTaking)
		_ = g.writeMember(ctx, "a", false, false)
		step("member written again after the gap, no list since", errNotTaking)
		g.readMembers(ctx)
		step("listed after it", nil)
		big := store.Open(MemberRecord("g", "big"))
		if _, err := big.Create(ctx, backend.Record{HolderIdentity: "big", LeaseDurationSeconds: 3, Group: backend.GroupMark{Shards: 4}}); err != nil {
			t.Fatal(err)
		}
		g.readMembers(ctx)
		step("a member of a larger count is live", errNotTaking)
		time.Sleep(testLease)
		_ = g.writeMember(ctx, "a", false, false)
		g.readMembers(ctx)
		step("the larger count's member unchanged for a lease", nil)
	})
}

// staleLister answers List, while stale, from the records as they were
// when it went stale, as a list served from a watch that has not yet
// delivered the latest writes does (lease.Backend with SharedWatch: as
// current as the watch stream); from the store otherwise.
type staleLister struct {
	backend.Lister
	mu    sync.Mutex
	stale bool
	then  []backend.Listed
}

func (s *staleLister) freeze(t *testing.T) {
	t.Helper()
	then, err := s.Lister.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stale, s.then = true, then
}

// rewind answers from the records as they were at the last freeze again.
func (s *staleLister) rewind() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stale = true
}

func (s *staleLister) thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stale = false
}

func (s *staleLister) List(ctx context.Context, prefix string) ([]backend.Listed, error) {
	s.mu.Lock()
	stale, then := s.stale, s.then
	s.mu.Unlock()
	if !stale {
		return s.Lister.List(ctx, prefix)
	}
	var out []backend.Listed
	for _, l := range then {
		if strings.HasPrefix(l.Name, prefix) {
			out = append(out, l)
		}
	}
	return out, nil
}

// TestAListThatDoesNotShowTheMemberWriteDoesNotCount drives one
// replica's member writes and lists by hand, its lists answered from a
// view of the store that may lag behind it: a list that began after the
// replica's member write, but does not show that write, is no list after
// it. Of two replicas of different counts, at least one sees the other
// only if each one's list shows every write the store took before its
// own: a list that shows the replica's own last write does. Without it,
// a replica taking its Yielded mark back and one of a larger count
// joining at the same moment can both take keys, each from a view
// without the other's write.
func TestAListThatDoesNotShowTheMemberWriteDoesNotCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		shards := []backend.Backend{store.Open(ShardRecord("g", 0)), store.Open(ShardRecord("g", 1))}
		member := store.Open(MemberRecord("g", "a"))
		lister := &staleLister{Lister: member}
		g, err := New(Config{Group: "g", Identity: "a", Shards: shards, Member: member, Members: lister,
			Election: election.Config{LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry, Logger: slog.New(slog.DiscardHandler)}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		mine := backend.Record{HolderIdentity: "a", LeaseDurationSeconds: 3, Transitions: 1}
		step := func(what string, want error) {
			t.Helper()
			if err := g.gate(0, mine); !errors.Is(err, want) {
				t.Errorf("%s: gate %v, want %v", what, err, want)
			}
		}
		lister.freeze(t)
		_ = g.writeMember(ctx, "a", false, false)
		g.readMembers(ctx)
		step("member written, then listed from a view without the write", errNotTaking)
		lister.thaw()
		g.readMembers(ctx)
		step("listed from a view with it", nil)

		// Yielded, then taken back: the list after must show the write
		// that took the mark out.
		g.setYielded(true)
		_ = g.writeMember(ctx, "a", true, false)
		g.readMembers(ctx)
		lister.freeze(t)
		_ = g.writeMember(ctx, "a", false, false)
		g.setYielded(false)
		g.markChanged()
		g.readMembers(ctx)
		step("the mark taken out, then listed from a view that still shows it", errNotTaking)
		lister.thaw()
		g.readMembers(ctx)
		step("listed from a view with the mark out", nil)

		// A list older than one before it (a watch that starts over
		// behind the list request before it) does not show the last
		// write either.
		lister.freeze(t)
		_ = g.writeMember(ctx, "a", false, false)
		lister.thaw()
		g.readMembers(ctx)
		step("listed after a renewal, from the store", nil)
		lister.rewind()
		g.readMembers(ctx)
		step("then from a view older than the renewal", errNotTaking)

		// A write that failed without landing leaves the record at the
		// last version written: a list that shows it still counts.
		lister.thaw()
		g.readMembers(ctx)
		store.SetError(errors.New("the store is down"))
		if err := g.writeMember(ctx, "a", false, false); err == nil {
			t.Fatal("a member write succeeded while the store was down")
		}
		store.SetError(nil)
		g.readMembers(ctx)
		step("a member write failed without landing, then listed", nil)
	})
}

// TestTwoCountsListingALaggingViewNeverBothMayTake drives two replicas by
// hand, of 2 and of 4 shards, listing one view of the store that lags
// behind it: a takes its Yielded mark back and b joins at the same
// moment, each writing its member record, then listing a view from before
// both writes (a still yielded, b not there). Neither may take a shard
// then; once the view shows both writes, at most one may.
func TestTwoCountsListingALaggingViewNeverBothMayTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		lister := &staleLister{Lister: store.Open(MemberRecord("g", "a"))}
		open := func(id string, n int) *Group {
			shards := make([]backend.Backend, n)
			for i := range shards {
				shards[i] = store.Open(ShardRecord("g", i))
			}
			g, err := New(Config{Group: "g", Identity: id, Shards: shards, Member: store.Open(MemberRecord("g", id)), Members: lister,
				Election: election.Config{LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry, Logger: slog.New(slog.DiscardHandler)}})
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		a, b := open("a", 2), open("b", 4)
		ctx := context.Background()
		mayTake := func(g *Group) bool {
			return g.gate(0, backend.Record{HolderIdentity: g.cfg.Identity, LeaseDurationSeconds: 3, Transitions: 1}) == nil
		}
		a.setYielded(true)
		_ = a.writeMember(ctx, "a", true, false)
		a.readMembers(ctx)
		lister.freeze(t)
		_ = a.writeMember(ctx, "a", false, false)
		a.setYielded(false)
		a.markChanged()
		_ = b.writeMember(ctx, "b", false, false)
		a.readMembers(ctx)
		b.readMembers(ctx)
		if mayTake(a) || mayTake(b) {
			t.Errorf("from a view without either write, a (2 shards) may take: %v, b (4 shards): %v; want neither", mayTake(a), mayTake(b))
		}
		lister.thaw()
		a.readMembers(ctx)
		b.readMembers(ctx)
		if mayTake(a) && mayTake(b) {
			t.Errorf("from a view with both writes, a (2 shards) and b (4 shards) may both take")
		}
	})
}
