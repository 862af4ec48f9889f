package settest

import (
	"context"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// nemesis injects faults until ctx ends, each after a wait of 0.5-2 s
// (longer while no leader's app has heard that it leads): the leader's
// sidecar is stopped (SIGSTOP) for the lease and 2-4 s more, then
// continued, or suffers a fault of the store (Config.StoreFaults) for as
// long, then undone; or a sidecar, the leader one time in two, is killed
// (SIGKILL) and a new one started in its place. The first fault is a
// pause, the fault that makes a stale leader; after that three in five
// are faults of the leader, a pause or each store fault alike. Every
// sidecar runs again, and reaches its store, when it returns.
func (r *Run) nemesis(ctx context.Context, rng *rand.Rand) {
	wait := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	paused := false
	for wait(500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))) {
		leader := r.leaderSlot()
		if leader < 0 {
			continue
		}
		if first := !paused; first || rng.IntN(5) < 3 {
			paused = true
			s := r.slot(leader)
			outage := sidecartest.LeaseDuration + 2*time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))
			if k := rng.IntN(1 + len(r.c.StoreFaults)); !first && k > 0 {
				f := r.c.StoreFaults[k-1]
				undo := f.Inject(s)
				r.count(f.Name)
				time.Sleep(outage)
				undo()
				continue
			}
			s.Signal(syscall.SIGSTOP)
			r.count("pause")
			time.Sleep(outage)
			s.Signal(syscall.SIGCONT)
			continue
		}
		victim := leader
		if rng.IntN(2) == 0 {
			victim = rng.IntN(len(r.slots))
		}
		s := r.slot(victim)
		s.Signal(syscall.SIGKILL)
		s.WaitExit(10 * time.Second)
		r.count("kill")
		next := r.c.Launch()
		next.WaitServing()
		r.mu.Lock()
		r.slots[victim] = next
		r.mu.Unlock()
	}
}

// leaderSlot is the replica whose sidecar answers leader:true and whose
// app has heard it, or -1: a leader paused before its app heard that it
// leads makes no stale leader.
func (r *Run) leaderSlot() int {
	for i := range r.slots {
		if st, err := ask(r.slot(i)); err == nil && st.Leader {
			r.mu.Lock()
			heard := r.leads[i]
			r.mu.Unlock()
			if heard {
				return i
			}
		}
	}
	return -1
}

// count counts a fault of kind.
func (r *Run) count(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[kind]++
}
