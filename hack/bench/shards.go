package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

// This file is the machinery of the shard-mode measurements
// (shardstop.go, shardscale.go, shardcost.go): a group of sidecar
// processes in shard mode, each with an application of the bench's that
// follows its GET /shards/watch and acknowledges every drain at once.

// shardsConfig sizes the shard-mode measurements.
type shardsConfig struct {
	Backends    []string    // shard-stop and shard-scale: sqlite, lease
	Shards      int         // shard-stop and shard-scale: shards of the group
	StopTrials  int         // shard-stop: graceful stops per backend
	Steps       []scaleStep // shard-scale: from and to replicas
	ScaleTrials int         // shard-scale: trials per backend and step
	CostShards  []int       // shard-cost: one group of CostReplicas per count
	CostWindow  time.Duration
	Replicas    int     // shard-stop and shard-cost: replicas of the group
	Profile     profile // shard-stop and shard-scale
	CostProfile profile
}

// scaleStep is a scale-up from From replicas to To.
type scaleStep struct{ From, To int }

func (s scaleStep) String() string { return fmt.Sprintf("%d → %d", s.From, s.To) }

// The shard-mode settings of the measured sidecars besides the timings:
// a newcomer is drained towards after 1s (the default 30s would only add
// itself to every scale-up), and a drain waits up to 10s for the app,
// which here acknowledges at once. On a Lease the sidecar sizes its
// client's rate by the shards (docs/shards.md), as a user's does.
const (
	shardRebalanceDelay = time.Second
	shardDrainTimeout   = 10 * time.Second
)

func shardArgs(n int) []string {
	return []string{"--shards", strconv.Itoa(n), "--shard-rebalance-delay", shardRebalanceDelay.String(), "--shard-drain-timeout", shardDrainTimeout.String()}
}

// shardEvent is one typed event of a replica's GET /shards/watch, with the
// instant the bench read it.
type shardEvent struct {
	At    time.Time
	Name  string
	Shard int
	Token int64
}

// shardReplica is one sidecar of a group and the bench's application
// beside it: a follower of its GET /shards/watch that keeps the latest
// state and every typed event but renewals, and acknowledges every drain
// at once (POST /shards/{i}/drained).
type shardReplica struct {
	*cand
	mu     sync.Mutex
	state  fence.ShardsJSON
	events []shardEvent
	acks   sync.WaitGroup
	ended  chan struct{} // closed once the stream has ended
}

func (r *shardReplica) latest() fence.ShardsJSON {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// eventsSince are the typed events read at or after t.
func (r *shardReplica) eventsSince(t time.Time) []shardEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, _ := slices.BinarySearchFunc(r.events, t, func(e shardEvent, t time.Time) int { return e.At.Compare(t) })
	return slices.Clone(r.events[i:])
}

// follow reads the replica's GET /shards/watch until the stream ends.
func (r *shardReplica) follow(ready chan<- error) {
	defer close(r.ended)
	req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://"+r.sidecar.Addr()+"/shards/watch", nil)
	resp, err := http.DefaultClient.Do(req)
	if err == nil && resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		err = fmt.Errorf("GET /shards/watch: %s", resp.Status)
	}
	if err != nil {
		ready <- err
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var name, data string
	first := true
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && data != "":
			r.record(time.Now(), name, data)
			if first && name == "" {
				first = false
				ready <- nil
			}
			name, data = "", ""
		}
	}
	if first {
		ready <- fmt.Errorf("GET /shards/watch ended before its first state: %v", sc.Err())
	}
}

func (r *shardReplica) record(at time.Time, name, data string) {
	if name == "" {
		var st fence.ShardsJSON
		if json.Unmarshal([]byte(data), &st) == nil {
			r.mu.Lock()
			r.state = st
			r.mu.Unlock()
		}
		return
	}
	if name == fence.EventRenewed {
		return
	}
	var e fence.ShardEventJSON
	if json.Unmarshal([]byte(data), &e) != nil {
		return
	}
	r.mu.Lock()
	r.events = append(r.events, shardEvent{At: at, Name: name, Shard: e.Shard, Token: e.Token})
	r.mu.Unlock()
	if name == fence.EventDraining {
		r.acks.Go(func() {
			resp, err := sidecartest.Client.Post("http://"+r.sidecar.Addr()+"/shards/"+strconv.Itoa(e.Shard)+"/drained", "", nil)
			if err == nil {
				resp.Body.Close()
			}
		})
	}
}

// shardGroup is the replicas of one shard group that are running.
type shardGroup struct {
	b                 *bench
	backend, ns, name string
	prof              profile
	n                 int
	live              []*shardReplica
}

// newShardGroup is an empty group of n shards on a fresh namespace (or
// SQLite file) named after base.
func (b *bench) newShardGroup(backend string, prof profile, n int, base string) (*shardGroup, error) {
	ns, err := b.namespace(fmt.Sprintf("%s-%s-%d", base, backend, n))
	if err != nil {
		return nil, err
	}
	return &shardGroup{b: b, backend: backend, ns: ns, name: "bench", prof: prof, n: n}, nil
}

// add starts k replicas at once and waits until each serves and its
// application follows its stream.
func (g *shardGroup) add(k int) ([]*shardReplica, error) {
	var added []*shardReplica
	for range k {
		c, err := g.b.spawn(sysSidecar, g.prof, g.backend, g.ns, g.name, false, shardArgs(g.n)...)
		if err != nil {
			return added, err
		}
		r := &shardReplica{cand: c, ended: make(chan struct{})}
		added = append(added, r)
		g.live = append(g.live, r)
	}
	for _, r := range added {
		if err := r.waitReady(60 * time.Second); err != nil {
			return added, err
		}
		ready := make(chan error, 1)
		go r.follow(ready)
		if err := <-ready; err != nil {
			return added, fmt.Errorf("sidecar %d: %w", r.cmd.Process.Pid, err)
		}
	}
	return added, nil
}

// remove takes r out of the live replicas (it has been signalled).
func (g *shardGroup) remove(r *shardReplica) {
	g.live = slices.DeleteFunc(g.live, func(x *shardReplica) bool { return x == r })
}

// settledShardGroup starts replicas sidecars of a fresh group of n
// shards named after base and waits until they hold the table
// shard.Assign gives over them, which it returns. The caller stops the
// group, after an error too (stop does nothing on a nil group).
func (b *bench) settledShardGroup(backend string, prof profile, n, replicas int, base string) (*shardGroup, shard.Table, error) {
	g, err := b.newShardGroup(backend, prof, n, base)
	if err != nil {
		return nil, nil, err
	}
	if _, err := g.add(replicas); err != nil {
		return g, nil, err
	}
	table, _, err := g.awaitConverged(g.convergeWithin())
	return g, table, err
}

func (g *shardGroup) stop() {
	if g == nil {
		return
	}
	var cs []*cand
	for _, r := range g.live {
		cs = append(cs, r.cand)
	}
	stopAll(cs)
	for _, r := range g.live {
		r.acks.Wait()
	}
}

// converged reports whether the live replicas hold the table shard.Assign
// gives over them, every shard held (not draining) by its target and by
// no one else, each replica seeing exactly the live replicas as members.
// It returns that table.
func (g *shardGroup) converged() (shard.Table, bool) {
	var ids []string
	states := make([]fence.ShardsJSON, len(g.live))
	for i, r := range g.live {
		states[i] = r.latest()
		if states[i].Identity == "" {
			return nil, false
		}
		ids = append(ids, states[i].Identity)
	}
	table, err := shard.Assign(g.n, ids)
	if err != nil {
		return nil, false
	}
	slices.Sort(ids)
	for _, st := range states {
		var held []int
		for _, h := range st.Held {
			if h.State != fence.ShardHeld {
				return nil, false
			}
			held = append(held, h.Shard)
		}
		slices.Sort(held)
		if !slices.Equal(held, table.Shards(st.Identity)) || !slices.Equal(st.Members, ids) {
			return nil, false
		}
	}
	return table, true
}

// awaitConverged waits until converged and returns the table and when it
// was first seen so.
func (g *shardGroup) awaitConverged(within time.Duration) (shard.Table, time.Time, error) {
	deadline := time.Now().Add(within)
	for {
		if t, ok := g.converged(); ok {
			return t, time.Now(), nil
		}
		if time.Now().After(deadline) {
			return nil, time.Time{}, fmt.Errorf("%d shards not held as assigned over %d replicas within %v: %s", g.n, len(g.live), within, g.describe())
		}
		for _, r := range g.live {
			if !r.alive() {
				return nil, time.Time{}, fmt.Errorf("sidecar %d exited:\n%s", r.cmd.Process.Pid, r.tail())
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// convergeWithin bounds a convergence: on a Lease the first claim of
// each shard waits a lease after creating its record; then joins wait the
// rebalance delay and a few retry periods; a slow machine, some more.
func (g *shardGroup) convergeWithin() time.Duration {
	return 2*g.prof.Lease + shardRebalanceDelay + 10*g.prof.Retry + time.Duration(g.n)*100*time.Millisecond + 20*time.Second
}

// describe is what each live replica holds and sees, for errors.
func (g *shardGroup) describe() string {
	var s []string
	for _, r := range g.live {
		st := r.latest()
		var held []string
		for _, h := range st.Held {
			held = append(held, fmt.Sprintf("%d:%d:%s", h.Shard, h.Token, h.State))
		}
		s = append(s, fmt.Sprintf("%s holds [%s] and sees %v", st.Identity, strings.Join(held, " "), st.Members))
	}
	return strings.Join(s, "; ")
}

// holderOf is the live replica whose identity is id.
func (g *shardGroup) holderOf(id string) *shardReplica {
	for _, r := range g.live {
		if r.latest().Identity == id {
			return r
		}
	}
	return nil
}

// renderShards is the section of the shard-mode measurements that ran. A
// run of some measurements only (-only) says when and how it was made,
// so that its section can stand in a page of another run.
func renderShards(w *page, c config, r *results) {
	if len(r.ShardStop)+len(r.ShardScale)+len(r.ShardCost) == 0 {
		return
	}
	w.section("Shard mode")
	w.p("Sidecar processes in shard mode (`--shards N`, [shards.md](shards.md)) with the short timings for the moves (lease 3s, renew deadline 2s, retry 0.5s), ")
	w.p("a rebalance delay of %s and a drain timeout of %s; on Leases the client's rate the sidecar sizes by the shards, every replica behind its own counting proxy. ",
		shardRebalanceDelay, shardDrainTimeout)
	w.p("Every replica's `GET /shards/watch` is followed by the bench, which acknowledges each drain at once, as an application would.\n\n")
	if len(c.Only) > 0 {
		w.p("Measured in a run of their own: `%s`, started %s, took %s, load average (1, 5, 15 min) %s at the start and %s at the end",
			strings.TrimSpace(c.Command), r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Took.Round(time.Second), r.LoadAvg[0], r.LoadAvg[1])
		if shared(r.LoadAvg) {
			w.p(", above the number of CPUs (%d): other work competed with the processes measured, and the tails say more about it than about the code", runtime.NumCPU())
		}
		w.p(".\n\n")
	}
	renderShardStop(w, r)
	renderShardScale(w, r)
	renderShardCost(w, r)
}
