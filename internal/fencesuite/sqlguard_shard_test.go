package fencesuite_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence/fencetest"
)

// writeShard is a fenced write of a shard's data as an application makes
// it: CheckShard, the write, commit.
func (f *fixture) writeShard(ctx context.Context, term fence.ShardTermID, value string) error {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f.guard.CheckShard(ctx, tx, term); err != nil {
		return err
	}
	if err := f.put(ctx, tx, term.Resource(), value); err != nil {
		return err
	}
	return tx.Commit()
}

// The per-shard SQL guard: every rule of GuardSteps on one shard's row
// ("billing/8/shard-3"), each shard a row of its own, and a term without a
// group or with a negative shard refused before any statement.
func TestSQLGuardPerShard(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		f := newFixture(t, d)
		ctx := t.Context()
		var last fence.TermID
		for _, s := range fencetest.GuardSteps() {
			term := fence.ShardTermID{Group: "billing", Shards: 8, Shard: 3, TermID: s.Term}
			err := f.writeShard(ctx, term, fmt.Sprint("written with ", s.Term))
			checkGuardAnswer(t, err, s.Term, s.Want)
			if s.Want == nil {
				last = s.Term
			}
			if value, accepted := f.state(t, "billing/8/shard-3"); accepted != last || value != fmt.Sprint("written with ", last) {
				t.Fatalf("after %s: %q, %v; want the write of %v", s.Name, value, accepted, last)
			}
		}
		if err := f.writeShard(ctx, fence.ShardTermID{Group: "billing", Shards: 8, Shard: 4, TermID: fencetest.Term(1)}, "shard 4"); err != nil {
			t.Fatalf("token 1 on shard 4 after token 6 on shard 3: %v", err)
		}
		for _, bad := range []fence.ShardTermID{
			{Shards: 8, Shard: 1, TermID: fencetest.Term(9)},
			{Group: "billing", Shards: 8, Shard: -1, TermID: fencetest.Term(9)},
			{Group: "billing", Shard: 1, TermID: fencetest.Term(9)},
		} {
			if err := f.writeShard(ctx, bad, "bad"); !errors.Is(err, fence.ErrInvalidToken) {
				t.Errorf("%v: %v, want ErrInvalidToken", bad, err)
			}
		}
	})
}

// Writers of four shards in concurrent transactions, each shard written by
// an old term (token 4) and a new one (token 5) at once: whatever the
// order, the new term's write is accepted and each shard keeps it (an old
// write that came after it was refused).
func TestSQLGuardPerShardConcurrentWriters(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		f := newFixture(t, d)
		ctx := t.Context()
		const shards = 4
		var wg sync.WaitGroup
		errs := make([][2]error, shards)
		for i := range shards {
			for j, token := range []int64{4, 5} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					term := fence.ShardTermID{Group: "billing", Shards: 8, Shard: i, TermID: fencetest.Term(token)}
					for {
						err := f.writeShard(ctx, term, fmt.Sprint("written with ", token))
						if err == nil || errors.Is(err, fence.ErrStaleToken) {
							errs[i][j] = err
							return
						}
						// A serialization failure or SQLITE_BUSY: retry.
					}
				}()
			}
		}
		wg.Wait()
		for i := range shards {
			value, term := f.state(t, fence.ShardResource("billing", 8, i))
			if value != "written with 5" || term != fencetest.Term(5) {
				t.Errorf("shard %d: %q, %v; want the write of token 5", i, value, term)
			}
			if errs[i][1] != nil {
				t.Errorf("shard %d: token 5 refused: %v", i, errs[i][1])
			}
		}
	})
}
