package main

import (
	"fmt"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// shardCostResult is the API server requests of an idle, settled group
// of Replicas in shard mode on Leases.
type shardCostResult struct {
	Prof             string
	Shards, Replicas int
	Window           time.Duration
	PerReplica       []counts // over the window, each replica's proxy
	Held             []int    // shards each replica held
	// HeldAfter is from the start of the group (every replica started at
	// once) until the table shard.Assign gives was held.
	HeldAfter   time.Duration
	OpenWatches []int64 // watches each replica had open at the window's end
	Moves       int     // acquired events in the window: 0 for an idle group
}

func (s shardCostResult) total() counts {
	var c counts
	for _, r := range s.PerReplica {
		c = c.add(r)
	}
	return c
}

// measureShardCost: one group per shard count.
func measureShardCost(b *bench, res *results) error {
	for _, n := range b.cfg.Shards.CostShards {
		r, err := b.shardCost(n)
		if err != nil {
			return fmt.Errorf("%d shards: %w", n, err)
		}
		res.ShardCost = append(res.ShardCost, r)
	}
	return nil
}

// shardCost starts Replicas sidecars of n shards on Leases, each behind
// its own counting proxy, waits until they hold the table, lets start-up
// requests pass, and counts every replica's requests over the window.
func (b *bench) shardCost(n int) (shardCostResult, error) {
	c := b.cfg.Shards
	r := shardCostResult{Prof: c.CostProfile.Name, Shards: n, Replicas: c.Replicas, Window: c.CostWindow}
	began := time.Now()
	g, _, err := b.settledShardGroup("lease", c.CostProfile, n, c.Replicas, "shard-cost")
	defer g.stop()
	if err != nil {
		return r, err
	}
	r.HeldAfter = time.Since(began)
	time.Sleep(settleTime(g.prof))
	before := make([]counts, len(g.live))
	for i, rep := range g.live {
		before[i] = rep.proxy.snapshot()
	}
	t0 := time.Now()
	time.Sleep(c.CostWindow)
	for i, rep := range g.live {
		r.PerReplica = append(r.PerReplica, rep.proxy.snapshot().sub(before[i]))
		r.Held = append(r.Held, len(rep.latest().Held))
		r.OpenWatches = append(r.OpenWatches, rep.proxy.openWatches.Load())
		for _, e := range rep.eventsSince(t0) {
			if e.Name == fence.EventAcquired {
				r.Moves++
			}
		}
	}
	tot := r.total()
	b.logf("  shard-cost %s %d shards x %d: held as assigned after %v; %.1f req/min per replica (%.1f Lease writes/min), held %v, open watches %v, %d moves in the window",
		g.prof.Name, n, c.Replicas, r.HeldAfter.Round(time.Millisecond),
		perMin(tot.total(), c.CostWindow)/float64(c.Replicas), perMin(tot.Writes, c.CostWindow)/float64(c.Replicas), r.Held, r.OpenWatches, r.Moves)
	return r, nil
}

func renderShardCost(w *page, r *results) {
	if len(r.ShardCost) == 0 {
		return
	}
	first := r.ShardCost[0]
	w.p("### API server cost against the number of shards\n\n")
	w.p("A group of %d replicas on Leases, %s timings (lease %s, renew deadline %s, retry %s: a holder renews each shard every %s, a third of the lease, ",
		first.Replicas, first.Prof, profileOf(first.Prof).Lease, profileOf(first.Prof).Renew, profileOf(first.Prof).Retry, profileOf(first.Prof).Lease/3)
	w.p("and every replica reads the member Leases every retry period, from its watch of the namespace's Leases when that watch is current, else with a list), idle once every shard is held as `shard.Assign` gives and start-up has passed. ")
	w.p("Requests per minute over the window, as each replica's counting proxy saw them (reads, writes and watches opened, as in the cost of one election); ")
	w.p("*per replica* is the group's total over the replicas. *Moves*: `acquired` events in the window, 0 for an idle group. ")
	w.p("*Held after*: from the start of the group, every replica started at once, until every shard was held as `shard.Assign` gives (a first claim of a Lease it creates waits a lease duration).\n\n")
	w.p("| shards | replicas | held after | window | shards held | requests/min per replica | reads | Lease writes | watches opened | busiest replica | group total | moves |\n")
	w.p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.ShardCost {
		tot, k := s.total(), float64(s.Replicas)
		var busiest int64
		for _, c := range s.PerReplica {
			busiest = max(busiest, c.total())
		}
		w.p("| %d | %d | %s | %s | %v | **%.1f** | %.1f | %.1f | %.1f | %.1f | %.1f | %d |\n", s.Shards, s.Replicas, s.HeldAfter.Round(100*time.Millisecond), s.Window, s.Held,
			perMin(tot.total(), s.Window)/k, perMin(tot.Reads, s.Window)/k, perMin(tot.Writes, s.Window)/k, perMin(tot.Watches, s.Window)/k,
			perMin(busiest, s.Window), perMin(tot.total(), s.Window), s.Moves)
	}
	w.p("\n")
}

// profileOf is the profile named name.
func profileOf(name string) profile {
	if name == profShort.Name {
		return profShort
	}
	return profDefault
}
