package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

// shardScaleResult is the trials of one scale-up on one backend.
type shardScaleResult struct {
	Backend, Prof string
	Shards        int
	Step          scaleStep
	Trials        []scaleTrial
}

// scaleTrial is one scale-up: a fresh group of Step.From replicas
// settled, then Step.To - Step.From more started at once.
type scaleTrial struct {
	Moves      int           // holder changes from the start of the newcomers until settled again, and through a quiet time after
	TableMoves int           // shards whose target differs between shard.Assign's table before and after
	Minimum    int           // the fewest holder changes that reach any table with the loads Assign allows (shard.FewestMoves)
	Settled    time.Duration // from the start of the newcomers until the new table is held for the last time
	Relapses   int           // times the table was held, then no longer within the quiet time
}

// awaitSettled waits until the group holds its table and still does a
// quiet time later (the rebalance delay and four retry periods), and
// returns the table and when it was last seen held; each time the table
// was held but not through the quiet time counts in relapses.
func (g *shardGroup) awaitSettled(relapses *int) (shard.Table, time.Time, error) {
	deadline := time.Now().Add(2 * g.convergeWithin())
	for {
		table, at, err := g.awaitConverged(time.Until(deadline))
		if err != nil {
			return nil, at, err
		}
		quiet := true
		for end := time.Now().Add(shardRebalanceDelay + 4*g.prof.Retry); quiet && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			_, quiet = g.converged()
		}
		if quiet {
			return table, at, nil
		}
		*relapses++
		g.b.logf("  the table was held %v ago, and no longer: %s", time.Since(at).Round(time.Millisecond), g.describe())
	}
}

// measureShardScale: every step on every backend, ScaleTrials each.
func measureShardScale(b *bench, res *results) error {
	c := b.cfg.Shards
	for _, be := range c.Backends {
		for _, step := range c.Steps {
			r := shardScaleResult{Backend: be, Prof: c.Profile.Name, Shards: c.Shards, Step: step}
			for i := range c.ScaleTrials {
				t, err := b.shardScale(be, step)
				if err != nil {
					res.ShardScale = append(res.ShardScale, r)
					return fmt.Errorf("%s %s trial %d: %w", be, step, i+1, err)
				}
				r.Trials = append(r.Trials, t)
				b.logf("  shard-scale %s %s trial %d: %d moves (table %d, minimum %d), settled after %v, %d relapses", be, step, i+1,
					t.Moves, t.TableMoves, t.Minimum, t.Settled.Round(time.Millisecond), t.Relapses)
			}
			res.ShardScale = append(res.ShardScale, r)
		}
	}
	return nil
}

// shardScale starts a fresh group of step.From replicas, waits until it
// holds its table, starts the newcomers at once, waits until the new
// table is held and then a quiet time (the rebalance delay and four retry
// periods) more, and counts every holder change since the newcomers
// started: each acquired event on a replica other than the shard's
// previous holder. A table held, then not, is waited out again.
func (b *bench) shardScale(backend string, step scaleStep) (scaleTrial, error) {
	c := b.cfg.Shards
	var t scaleTrial
	g, before, err := b.settledShardGroup(backend, c.Profile, c.Shards, step.From, "shard-scale")
	defer g.stop()
	if err != nil {
		return t, err
	}
	holder := slices.Clone(before)
	t0 := time.Now()
	if _, err := g.add(step.To - step.From); err != nil {
		return t, err
	}
	after, at, err := g.awaitSettled(&t.Relapses)
	if err != nil {
		return t, err
	}
	t.Settled = at.Sub(t0)
	var acq []ownedEvent
	for _, r := range g.live {
		id := r.latest().Identity
		for _, e := range r.eventsSince(t0) {
			if e.Name == fence.EventAcquired {
				acq = append(acq, ownedEvent{e, id})
			}
		}
	}
	slices.SortFunc(acq, func(a, b ownedEvent) int { return a.At.Compare(b.At) })
	for _, e := range acq {
		if holder[e.Shard] != e.by {
			t.Moves++
			holder[e.Shard] = e.by
		}
	}
	for i := range before {
		if before[i] != after[i] {
			t.TableMoves++
		}
	}
	var members []string
	for _, r := range g.live {
		members = append(members, r.latest().Identity)
	}
	t.Minimum = shard.FewestMoves(before, members)
	return t, nil
}

// ownedEvent is a typed event and the identity of the replica it came from.
type ownedEvent struct {
	shardEvent
	by string
}

func renderShardScale(w *page, r *results) {
	if len(r.ShardScale) == 0 {
		return
	}
	w.p("### Moves on a scale-up\n\n")
	w.p("A fresh group of %d shards on the first count of replicas, settled (every shard held as `shard.Assign` gives over them), ", r.ShardScale[0].Shards)
	w.p("then the newcomers started at once. *Moves*: holder changes, counted from the newcomers' start until the new table is held and through a quiet time after it ")
	w.p("(the rebalance delay and four retry periods, in which nothing may move): every `acquired` event on any replica's stream, in time order, that names a replica ")
	w.p("other than the shard's holder before it. *Table*: the shards whose target differs between `shard.Assign`'s table over the old replicas and over all of them, ")
	w.p("which is what moves if every replica sees the newcomers at the same instant. *Minimum*: the fewest holder changes that reach any table with the loads Assign allows ")
	w.p("(each replica floor(N/M) or ceil(N/M) shards): every old replica keeps as many of its shards as its new load allows, the largest loads taking the ceil slots, ")
	w.p("and every other shard moves once. *Settled*: from the newcomers' start until the new table is held (the rebalance delay, %s, is part of it).\n\n", shardRebalanceDelay)
	w.p("*Relapses*: trials in which the table was held, then no longer within the quiet time (the moves until it was held again, through a quiet time, are counted).\n\n")
	w.p("| backend | timings | shards | replicas | trials | moves (mean, max) | table | minimum | moves ÷ minimum | settled p50 | settled max | relapses |\n")
	w.p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.ShardScale {
		if len(s.Trials) == 0 {
			continue
		}
		var moves, table, minimum, most, relapsed int
		var settled []time.Duration
		for _, t := range s.Trials {
			moves, table, minimum, most = moves+t.Moves, table+t.TableMoves, minimum+t.Minimum, max(most, t.Moves)
			if t.Relapses > 0 {
				relapsed++
			}
			settled = append(settled, t.Settled)
		}
		slices.Sort(settled)
		n := float64(len(s.Trials))
		w.p("| %s | %s | %d | %s | %d | %.1f, %d | %.1f | %.1f | %s | %s | %s | %d |\n", s.Backend, s.Prof, s.Shards, s.Step, len(s.Trials),
			float64(moves)/n, most, float64(table)/n, float64(minimum)/n, ratio(float64(moves), float64(minimum)), ms(pct(settled, 50)), ms(settled[len(settled)-1]), relapsed)
	}
	w.p("\n")
}
