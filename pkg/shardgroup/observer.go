package shardgroup

import (
	"sync/atomic"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// shardObserver is the election.Observer of one shard's elector: it counts
// the terms begun (Moves.Acquired) and passes every report on to next:
// Config.Election.Observer, then Config.ShardObserver's for this shard,
// those that are set. It takes no lock of the Group: an elector reports
// from its own loop, and the Group reads electors under its lock.
type shardObserver struct {
	acquired *atomic.Int64
	next     []election.Observer
}

var (
	_ election.TermObserver       = (*shardObserver)(nil)
	_ election.LeaseBoundObserver = (*shardObserver)(nil)
)

// shardObserverOf is cfg.ShardObserver's Observer for shard i, or nil.
func shardObserverOf(cfg Config, i int) election.Observer {
	if cfg.ShardObserver == nil {
		return nil
	}
	return cfg.ShardObserver(i)
}

func (o *shardObserver) LeadershipChanged(leading bool, token int64) {
	if leading {
		o.acquired.Add(1)
	}
	for _, n := range o.next {
		n.LeadershipChanged(leading, token)
	}
}

func (o *shardObserver) RenewFailed(err error) {
	for _, n := range o.next {
		n.RenewFailed(err)
	}
}

func (o *shardObserver) TokenAnomaly(a election.TokenAnomaly, seen, highest int64) {
	for _, n := range o.next {
		n.TokenAnomaly(a, seen, highest)
	}
}

func (o *shardObserver) LeaseDurationBounded(holder string, declared, bound time.Duration) {
	for _, n := range o.next {
		if n, ok := n.(election.LeaseBoundObserver); ok {
			n.LeaseDurationBounded(holder, declared, bound)
		}
	}
}

func (o *shardObserver) TermStarted(t election.TermStart) {
	for _, n := range o.next {
		if n, ok := n.(election.TermObserver); ok {
			n.TermStarted(t)
		}
	}
}

func (o *shardObserver) TermEnded(t election.TermEnd) {
	for _, n := range o.next {
		if n, ok := n.(election.TermObserver); ok {
			n.TermEnded(t)
		}
	}
}
