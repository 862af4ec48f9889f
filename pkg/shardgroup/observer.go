package shardgroup

import (
	"sync/atomic"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// shardObserver is the election.Observer of one shard's elector: it counts
// the terms begun (Moves.Acquired) and passes every report on to next,
// Config.Election.Observer, when set. It takes no lock of the Group: an
// elector reports from its own loop, and the Group reads electors under
// its lock.
type shardObserver struct {
	acquired *atomic.Int64
	next     election.Observer
}

var _ election.TermObserver = (*shardObserver)(nil)

func (o *shardObserver) LeadershipChanged(leading bool, token int64) {
	if leading {
		o.acquired.Add(1)
	}
	if o.next != nil {
		o.next.LeadershipChanged(leading, token)
	}
}

func (o *shardObserver) RenewFailed(err error) {
	if o.next != nil {
		o.next.RenewFailed(err)
	}
}

func (o *shardObserver) TokenAnomaly(a election.TokenAnomaly, seen, highest int64) {
	if o.next != nil {
		o.next.TokenAnomaly(a, seen, highest)
	}
}

func (o *shardObserver) TermStarted(t election.TermStart) {
	if next, ok := o.next.(election.TermObserver); ok {
		next.TermStarted(t)
	}
}

func (o *shardObserver) TermEnded(t election.TermEnd) {
	if next, ok := o.next.(election.TermObserver); ok {
		next.TermEnded(t)
	}
}
