package fence_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence/fencetest"
)

// checkGuardAnswer fails unless err is what a guard must answer a write of
// term (see fencetest.CheckAnswer).
func checkGuardAnswer(t *testing.T, err error, term fence.TermID, want error) {
	t.Helper()
	if err := fencetest.CheckAnswer(err, term, want); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryGuard(t *testing.T) {
	var g fence.MemoryGuard // the zero value is ready
	value := fence.TermID{}
	var last fence.TermID // the last accepted
	for _, s := range fencetest.GuardSteps() {
		t.Run(s.Name, func(t *testing.T) {
			err := g.Do("billing", s.Term, func() error { value = s.Term; return nil })
			checkGuardAnswer(t, err, s.Term, s.Want)
			if s.Want == nil {
				last = s.Term
			}
			if accepted, ok := g.Accepted("billing"); value != last || accepted != last || !ok {
				t.Fatalf("value written by %v, accepted %v %v; want %v", value, accepted, ok, last)
			}
			if s.Want == fence.ErrTokenReused && !strings.Contains(err.Error(), last.Holder) {
				t.Fatalf("%q does not name the holder that has the token", err)
			}
		})
	}
	if err := g.Do("reports", fencetest.Term(1), func() error { return nil }); err != nil {
		t.Fatalf("another resource: %v", err)
	}
}

func TestMemoryGuardDoesNotRecordAFailedWrite(t *testing.T) {
	g := fence.NewMemoryGuard()
	boom := errors.New("disk full")
	if err := g.Do("billing", fencetest.Term(9), func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want the write's error", err)
	}
	if _, ok := g.Accepted("billing"); ok {
		t.Fatal("a failed write recorded its term")
	}
	if err := g.Do("billing", fencetest.Term(2), func() error { return nil }); err != nil {
		t.Fatalf("token 2 after a failed 9: %v", err)
	}
}

// Concurrent writers with random tokens from two holders that reuse them:
// every write that runs follows the one that ran before it, and no two
// writes run at once (Do serialises them: a write that yields inside Do
// lets no other check and write in). Each write yields in the middle, so
// that a guard that checked under its lock and wrote after it would let
// writes overlap and land out of order.
func TestMemoryGuardConcurrent(t *testing.T) {
	g := fence.NewMemoryGuard()
	var ran []fence.TermID // appended inside Do, under the guard's lock
	var writing, overlaps atomic.Int64
	write := func(term fence.TermID) func() error {
		return func() error {
			if writing.Add(1) > 1 {
				overlaps.Add(1)
			}
			runtime.Gosched()
			ran = append(ran, term)
			writing.Add(-1)
			return nil
		}
	}
	var wg sync.WaitGroup
	for i := range 8 {
		holder := fmt.Sprintf("app-%d_1", i%2)
		wg.Add(1)
		go func() { // not wg.Go: this module builds with Go 1.22
			defer wg.Done()
			for range 200 {
				term := fence.TermID{Token: rand.Int64N(50), Holder: holder}
				err := g.Do("billing", term, write(term))
				if err != nil && !errors.Is(err, fence.ErrStaleToken) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("a write began while another ran, %d times: Do does not serialise writes", n)
	}
	for i := 1; i < len(ran); i++ {
		prev, cur := ran[i-1], ran[i]
		if cur.Token < prev.Token || (cur.Token == prev.Token && cur.Holder != prev.Holder) {
			t.Fatalf("write %d ran with %v after %v", i, cur, prev)
		}
	}
	if accepted, _ := g.Accepted("billing"); len(ran) == 0 || accepted != ran[len(ran)-1] {
		t.Fatalf("accepted %v, last write %v", accepted, ran[len(ran)-1:])
	}
}

// The per-shard guard: every rule of GuardSteps on one shard's resource,
// and each shard (of each group) with a last accepted term of its own.
func TestMemoryGuardPerShard(t *testing.T) {
	if got := fence.ShardResource("billing", 8, 3); got != "billing/8/shard-3" {
		t.Fatalf("ShardResource = %q", got)
	}
	var g fence.MemoryGuard
	var last fence.TermID
	for _, s := range fencetest.GuardSteps() {
		t.Run(s.Name, func(t *testing.T) {
			term := fence.ShardTermID{Group: "billing", Shards: 8, Shard: 3, TermID: s.Term}
			err := g.DoShard(term, func() error { return nil })
			checkGuardAnswer(t, err, s.Term, s.Want)
			if s.Want == nil {
				last = s.Term
			}
			if accepted, ok := g.Accepted("billing/8/shard-3"); !ok || accepted != last {
				t.Fatalf("accepted %v %v, want %v", accepted, ok, last)
			}
		})
	}
	// Tokens are per shard: a low token of another shard, or of the same
	// shard number of another count or in another group, is not stale.
	for _, other := range []fence.ShardTermID{
		{Group: "billing", Shards: 8, Shard: 4, TermID: fencetest.Term(1)},
		{Group: "billing", Shards: 4, Shard: 3, TermID: fencetest.Term(1)},
		{Group: "reports", Shards: 8, Shard: 3, TermID: fencetest.Term(1)},
	} {
		if err := g.DoShard(other, func() error { return nil }); err != nil {
			t.Errorf("%v after token 6 on shard 3 of billing: %v", other, err)
		}
	}
	if err := g.DoShard(fence.ShardTermID{Group: "billing", Shards: 8, Shard: 3, TermID: fencetest.Term(2)}, func() error { return nil }); !errors.Is(err, fence.ErrStaleToken) || !strings.Contains(err.Error(), "billing/8/shard-3") {
		t.Errorf("a stale term of shard 3: %v, want ErrStaleToken naming billing/8/shard-3", err)
	}
	for _, bad := range []fence.ShardTermID{
		{Shards: 8, Shard: 1, TermID: fencetest.Term(9)},
		{Group: "billing", Shards: 8, Shard: -1, TermID: fencetest.Term(9)},
		{Group: "billing", Shards: 8, Shard: 8, TermID: fencetest.Term(9)},
		{Group: "billing", Shard: 1, TermID: fencetest.Term(9)},
		{Group: "billing", Shards: 8, Shard: 1, TermID: fence.TermID{Token: 9}},
	} {
		ran := false
		if err := g.DoShard(bad, func() error { ran = true; return nil }); !errors.Is(err, fence.ErrInvalidToken) || ran {
			t.Errorf("%v: %v (write ran: %v), want ErrInvalidToken", bad, err, ran)
		}
	}
}

// Concurrent writers on four shards, two holders reusing random tokens on
// each: on every shard, every write that ran follows the one that ran
// before it on that shard.
func TestMemoryGuardPerShardConcurrent(t *testing.T) {
	g := fence.NewMemoryGuard()
	ran := make([][]fence.TermID, 4) // appended inside DoShard, under the guard's lock
	var wg sync.WaitGroup
	for i := range 16 {
		shard, holder := i%4, fmt.Sprintf("app-%d_1", i%2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				term := fence.ShardTermID{Group: "billing", Shards: 8, Shard: shard, TermID: fence.TermID{Token: rand.Int64N(50), Holder: holder}}
				err := g.DoShard(term, func() error { ran[shard] = append(ran[shard], term.TermID); return nil })
				if err != nil && !errors.Is(err, fence.ErrStaleToken) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	for shard, terms := range ran {
		for i := 1; i < len(terms); i++ {
			prev, cur := terms[i-1], terms[i]
			if cur.Token < prev.Token || (cur.Token == prev.Token && cur.Holder != prev.Holder) {
				t.Fatalf("shard %d: write %d ran with %v after %v", shard, i, cur, prev)
			}
		}
		if accepted, _ := g.Accepted(fence.ShardResource("billing", 8, shard)); len(terms) == 0 || accepted != terms[len(terms)-1] {
			t.Fatalf("shard %d: accepted %v, last write %v", shard, accepted, terms)
		}
	}
}
