package shardgroup

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

// Defaults of the group's move timings.
const (
	DefaultRebalanceDelay = 30 * time.Second
	DefaultDrainTimeout   = 30 * time.Second
)

// Config configures one replica of a group.
type Config struct {
	// Group names the group; its records are named after it (names.go).
	Group string
	// Identity names this replica, unique per process start. It is the
	// holder every shard record names while this replica holds it.
	Identity string
	// Shards are the backends of the shard records: Shards[i] stores
	// ShardRecord(Group, i). Their number is the group's, 1 to
	// shard.MaxShards.
	Shards []backend.Backend
	// Member stores this replica's member record, MemberRecord(Group,
	// Identity).
	Member backend.Backend
	// Members lists the group's member records (MemberPrefix(Group)) in
	// the store Member writes to.
	Members backend.Lister
	// Election holds the timings, clock, logger and jitter of every
	// shard's elector; zero timings take election's defaults. Its
	// Observer, when set, hears every shard's elector alike (an
	// election.TermObserver hears their terms too). Its Backend,
	// Identity and ReleaseOnCancel are ignored.
	Election election.Config
	// ShardObserver, when set, gives an Observer for shard i's elector
	// alone (nil for none), which hears it after Election.Observer: a
	// report about the shard's own record, such as a Kubernetes Event
	// related to its Lease.
	ShardObserver func(i int) election.Observer
	// RebalanceDelay is how long a member must have been live before a
	// shard held here is drained towards it (shard.Policy).
	RebalanceDelay time.Duration
	// DrainTimeout is how long a draining shard waits for the
	// application's acknowledgement (Drained) before it is released.
	DrainTimeout time.Duration
	// StopDrainTimeout takes DrainTimeout's place once the replica is
	// leaving (Run's context ended): how long each shard it drains on its
	// way out, or was draining already, waits for the acknowledgement
	// before it is released. 0 releases every shard at once after the
	// member record, for an application that has stopped before its
	// replica (a native sidecar is stopped after its Pod's app
	// containers) and so can acknowledge nothing. Set it to DrainTimeout
	// for an application that still runs while its replica stops.
	StopDrainTimeout time.Duration
	// MaxPerMember, when above 0, caps the shards this replica contends
	// for or holds: it acquires none beyond it. 0: only the fair share
	// of its view (shard.Assign), which a replica may exceed while others
	// join.
	MaxPerMember int
}

// withDefaults fills the election's zero timings as election.New would.
func (c Config) withDefaults() Config {
	e := &c.Election
	if e.LeaseDuration == 0 {
		e.LeaseDuration = election.DefaultLeaseDuration
	}
	if e.RenewDeadline == 0 {
		e.RenewDeadline = election.DefaultRenewDeadline
	}
	if e.RetryPeriod == 0 {
		e.RetryPeriod = election.DefaultRetryPeriod
	}
	if e.RenewInterval == 0 {
		e.RenewInterval = election.DefaultRenewInterval(e.LeaseDuration, e.RenewDeadline, e.RetryPeriod)
	}
	if e.Clock == nil {
		e.Clock = clock.RealClock{}
	}
	if e.Logger == nil {
		e.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Group == "":
		return errors.New("shard group: the group's name must not be empty")
	case c.Identity == "":
		return errors.New("shard group: the identity must not be empty")
	case c.Member == nil || c.Members == nil:
		return errors.New("shard group: the member record's backend and its lister are required")
	case c.RebalanceDelay < 0:
		return fmt.Errorf("shard group: the rebalance delay must not be negative, got %v", c.RebalanceDelay)
	case c.DrainTimeout < 0:
		return fmt.Errorf("shard group: the drain timeout must not be negative, got %v", c.DrainTimeout)
	case c.StopDrainTimeout < 0:
		return fmt.Errorf("shard group: the stop drain timeout must not be negative, got %v", c.StopDrainTimeout)
	case c.MaxPerMember < 0:
		return fmt.Errorf("shard group: the cap per member must not be negative, got %d", c.MaxPerMember)
	}
	if err := shard.CheckCount(len(c.Shards)); err != nil {
		return fmt.Errorf("shard group: %w", err)
	}
	for i, b := range c.Shards {
		if b == nil {
			return fmt.Errorf("shard group: shard %d has no backend", i)
		}
	}
	return nil
}
