package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// runShards is the worker next to a sidecar in shard mode (--shards): it
// follows the sidecar's shard terms (fence.Client.ShardTerms) and, for
// each shard it holds, runs one job every --interval in a goroutine of the
// shard's own, each job's write fenced by the shard's term
// (guard.CheckShard, resource "<group>/<N>/shard-<i>"). When the sidecar
// drains a shard, the shard's jobs stop, then the worker acknowledges
// (Client.Drained) so the shard moves at once.
func (w *worker) runShards(ctx context.Context, client *fence.Client) error {
	var terms *fence.ShardTerms
	for terms == nil {
		var err error
		if terms, err = client.ShardTerms(ctx); err != nil {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(200 * time.Millisecond): // the sidecar is not serving yet
			}
		}
	}
	defer terms.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	w.log.Info("waiting")
	for {
		term, err := terms.Next(ctx)
		if errors.Is(err, fence.ErrTokenRegressed) {
			w.log.Info("token-regressed", "error", err.Error())
			continue
		}
		if err != nil {
			return nil // only once ctx is done: we were told to stop
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.workOnShard(ctx, client, term)
		}()
	}
}

// workOnShard runs the jobs of one shard's term until it is over.
func (w *worker) workOnShard(ctx context.Context, client *fence.Client, term *fence.ShardTerm) {
	defer term.Close()
	id := term.ID()
	if term.Err() == nil { // else a drain to acknowledge, of a term not worked on here
		w.log.Info("shard-leading", "shard", id.Shard, "token", id.Token, "holder", id.Holder)
	}
	jobs := 0
	for term.Err() == nil && ctx.Err() == nil {
		jobs++
		w.shardJob(id, fmt.Sprintf("%s-%d-%d", w.name, id.Shard, jobs))
		select {
		case <-time.After(w.interval):
		case <-term.Done():
		case <-ctx.Done():
		}
	}
	w.log.Info("shard-term-over", "shard", id.Shard, "token", id.Token, "reason", termOverReason(ctx, term.Err()))
	if errors.Is(term.Err(), fence.ErrShardDraining) {
		// No job of this term is under way any more: let the shard go.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := client.Drained(actx, id); err != nil {
			w.log.Info("drain-not-acknowledged", "shard", id.Shard, "token", id.Token, "error", err.Error())
			return
		}
		w.log.Info("drained", "shard", id.Shard, "token", id.Token)
	}
}

// shardJob computes a value and writes it in the shard's term. Like job,
// it runs to its end once it has taken the term, however long this
// process is paused on the way: the guard refuses a late write.
func (w *worker) shardJob(term fence.ShardTermID, value string) {
	w.log.Info("about-to-write", "shard", term.Shard, "token", term.Token, "writer", w.name, "value", value)
	time.Sleep(w.workDelay) // the work; a pause here is what fencing is for
	jctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := w.writeShard(jctx, term, value)
	attrs := []any{"shard", term.Shard, "token", term.Token, "holder", term.Holder, "writer", w.name, "value", value, "accepted", err == nil}
	if err != nil {
		attrs = append(attrs, "stale", errors.Is(err, fence.ErrStaleToken), "error", err.Error())
	}
	w.log.Info("write", attrs...)
}

// writeShard checks the shard's term and stores value in one transaction:
// the shard's row of results, and a row of shard_writes, the log of every
// write accepted.
func (w *worker) writeShard(ctx context.Context, term fence.ShardTermID, value string) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if w.guard != nil {
		if err := w.guard.CheckShard(ctx, tx, term); err != nil {
			return err // fence.ErrStaleToken: a newer term of the shard has written
		}
	}
	resource := term.Resource()
	if _, err := tx.ExecContext(ctx, `INSERT INTO results (resource, value, writer, token)
		VALUES ($1, $2, $3, $4) ON CONFLICT (resource) DO UPDATE
		SET value = excluded.value, writer = excluded.writer, token = excluded.token`,
		resource, value, w.name, term.Token); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO shard_writes (resource, token, holder, writer, value)
		VALUES ($1, $2, $3, $4, $5)`, resource, term.Token, term.Holder, w.name, value); err != nil {
		return err
	}
	return tx.Commit()
}
