package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// shardStopResult is the moves of the shards of replicas stopped
// gracefully, one group of Replicas on one backend.
type shardStopResult struct {
	Backend, Prof    string
	Shards, Replicas int
	Trials           int
	Moves            []shardMove
	ExitedNonZero    int // stopped replicas whose exit status was not 0
	Relapses         int // trials before which the settled group no longer held its table
}

// shardMove is one shard of a stopped replica, from its SIGTERM.
type shardMove struct {
	Shard    int
	Released time.Duration // the stopped replica's released event; 0 if its stream ended first
	Acquired time.Duration // another replica's acquired event
}

func acquired(m shardMove) time.Duration { return m.Acquired }
func released(m shardMove) time.Duration { return m.Released }

// measureShardStop: graceful stops in a group on each backend.
func measureShardStop(b *bench, res *results) error {
	for _, be := range b.cfg.Shards.Backends {
		r, err := b.shardStop(be)
		res.ShardStop = append(res.ShardStop, r)
		if err != nil {
			return fmt.Errorf("%s: %w", be, err)
		}
	}
	return nil
}

// shardStop starts a group of Replicas and, trial after trial, sends
// SIGTERM to one of them at random, at a random phase of the retry
// period, and times each of its shards until another replica's stream
// says acquired; then starts a replica in its place and waits until the
// group holds its table again.
func (b *bench) shardStop(backend string) (shardStopResult, error) {
	c := b.cfg.Shards
	r := shardStopResult{Backend: backend, Prof: c.Profile.Name, Shards: c.Shards, Replicas: c.Replicas}
	g, _, err := b.settledShardGroup(backend, c.Profile, c.Shards, c.Replicas, "shard-stop")
	defer g.stop()
	if err != nil {
		return r, err
	}
	for trial := range c.StopTrials {
		<-randomPause(g.prof)
		if _, ok := g.converged(); !ok {
			r.Relapses++
			b.logf("  the table is no longer held: %s", g.describe())
			if _, _, err := g.awaitConverged(g.convergeWithin()); err != nil {
				return r, fmt.Errorf("trial %d: %w", trial+1, err)
			}
		}
		victim := g.live[rand.IntN(len(g.live))]
		var shards []int
		for _, h := range victim.latest().Held {
			shards = append(shards, h.Shard)
		}
		t0 := time.Now()
		_ = victim.cmd.Process.Signal(syscall.SIGTERM)
		g.remove(victim)
		moves, err := g.awaitMoves(victim, shards, t0)
		r.Moves = append(r.Moves, moves...)
		if err != nil {
			return r, fmt.Errorf("trial %d: %w", trial+1, err)
		}
		select {
		case <-victim.done:
		case <-time.After(shardDrainTimeout + 10*time.Second):
			return r, fmt.Errorf("trial %d: the stopped sidecar %d has not exited", trial+1, victim.cmd.Process.Pid)
		}
		victim.acks.Wait()
		if victim.cmd.ProcessState.ExitCode() != 0 {
			r.ExitedNonZero++
		}
		r.Trials++
		b.logf("  shard-stop %s/%s trial %d: shards %v acquired after %v", backend, g.prof.Name, trial+1, shards, movesString(moves))
		if trial == c.StopTrials-1 {
			break
		}
		if _, err := g.add(1); err != nil {
			return r, err
		}
		if _, _, err := g.awaitConverged(g.convergeWithin()); err != nil {
			return r, fmt.Errorf("trial %d, after a replica joined: %w", trial+1, err)
		}
	}
	return r, nil
}

// awaitMoves waits until another live replica's stream says acquired for
// each of shards, after t0, and times it and the stopped replica's
// release from t0.
func (g *shardGroup) awaitMoves(stopped *shardReplica, shards []int, t0 time.Time) ([]shardMove, error) {
	deadline := time.Now().Add(2*g.prof.Lease + shardDrainTimeout + 10*time.Second)
	moves := make([]shardMove, len(shards))
	for {
		done, streamEnded := 0, false
		select {
		case <-stopped.ended:
			streamEnded = true
		default:
		}
		for i, s := range shards {
			moves[i].Shard = s
			if moves[i].Acquired == 0 {
				for _, r := range g.live {
					if e, ok := firstEvent(r.eventsSince(t0), fence.EventAcquired, s); ok {
						moves[i].Acquired = e.At.Sub(t0)
					}
				}
			}
			if moves[i].Released == 0 {
				if e, ok := firstEvent(stopped.eventsSince(t0), fence.EventReleased, s); ok {
					moves[i].Released = e.At.Sub(t0)
				}
			}
			if moves[i].Acquired > 0 && (moves[i].Released > 0 || streamEnded) {
				done++
			}
		}
		if done == len(shards) {
			return moves, nil
		}
		if time.Now().After(deadline) {
			var got []shardMove
			for _, m := range moves {
				if m.Acquired > 0 {
					got = append(got, m)
				}
			}
			return got, fmt.Errorf("shards %v of the stopped sidecar not all released and acquired within %v: %+v; %s",
				shards, time.Since(t0).Round(time.Millisecond), moves, g.describe())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func firstEvent(evs []shardEvent, name string, s int) (shardEvent, bool) {
	i := slices.IndexFunc(evs, func(e shardEvent) bool { return e.Name == name && e.Shard == s })
	if i < 0 {
		return shardEvent{}, false
	}
	return evs[i], true
}

func movesString(ms []shardMove) string {
	s := ""
	for _, m := range ms {
		s += fmt.Sprintf(" %d: %v (released %v)", m.Shard, m.Acquired.Round(time.Microsecond), m.Released.Round(time.Microsecond))
	}
	return s
}

// sortedMoves is f of every move, sorted, leaving out zeros (not seen).
func sortedMoves(ms []shardMove, f func(shardMove) time.Duration) []time.Duration {
	var d []time.Duration
	for _, m := range ms {
		if v := f(m); v > 0 {
			d = append(d, v)
		}
	}
	slices.Sort(d)
	return d
}

func renderShardStop(w *page, r *results) {
	if len(r.ShardStop) == 0 {
		return
	}
	first := r.ShardStop[0]
	w.p("### Moves on a graceful stop\n\n")
	w.p("A group of %d replicas and %d shards, every replica a sidecar process with an application of the bench's beside it, which follows its `GET /shards/watch` ", first.Replicas, first.Shards)
	w.p("and acknowledges each drain at once (`POST /shards/{i}/drained`). Once every shard is held as `shard.Assign` gives, the bench waits a random 0.2–2.2× retry period ")
	w.p("and sends SIGTERM to a replica drawn at random; for each shard it held, the time from the SIGTERM until the stopped replica's stream says `released`, ")
	w.p("and until another replica's stream says `acquired`. Then a new replica joins in its place and the group settles again before the next trial. ")
	w.p("Each shard of each stopped replica is one move. *Relapses*: trials before which the group, settled, no longer held its table (it was waited for again).\n\n")
	w.p("| backend | timings | trials | moves | released p50 | released p99 | acquired p50 | acquired p90 | acquired p99 | acquired max | exit status 0 | relapses |\n")
	w.p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.ShardStop {
		if len(s.Moves) == 0 {
			continue
		}
		rel, acq := sortedMoves(s.Moves, released), sortedMoves(s.Moves, acquired)
		relP50, relP99 := "", ""
		if len(rel) > 0 {
			relP50, relP99 = ms(pct(rel, 50)), ms(pct(rel, 99))
		}
		w.p("| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %d / %d | %d |\n", s.Backend, s.Prof, s.Trials, len(s.Moves),
			relP50, relP99, ms(pct(acq, 50)), ms(pct(acq, 90)), ms(pct(acq, 99)), ms(acq[len(acq)-1]), s.Trials-s.ExitedNonZero, s.Trials, s.Relapses)
	}
	w.p("\n")
}
