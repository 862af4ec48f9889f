package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// ShardGroup is what the metrics of shard mode read, at scrape time;
// *shardgroup.Group implements it.
type ShardGroup interface {
	Status() shardgroup.Status
	Moves() shardgroup.Moves
}

// The event label of shard_moves_total.
const (
	moveAcquired     = "acquired"
	moveDrainStarted = "drain_started"
	moveReleased     = "released"
)

// WatchShards registers the metrics of shard mode, read from g on every
// scrape (one Status per collector per scrape, so a claim that lapses is
// 0 at once): client-go's leader_election_master_status with
// name="<group>-shard-<i>" for every shard of the group, 1 while this
// replica claims the shard and 0 otherwise, so that every member exports
// every shard from its start; shards_held, shards_draining,
// shard_members; and shard_moves_total by event. Info.Lease is the
// group's name in shard mode, so the lease label of these is the group.
// The single election's WatchStatus is not called in shard mode.
func (m *Metrics) WatchShards(g ShardGroup) {
	m.registry.MustRegister(&shardStatusCollector{g: g, desc: prometheus.NewDesc(
		"leader_election_master_status",
		"Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. "+
			"'name' is the string used to identify the lease. Please make sure to group by name.",
		[]string{"name"}, nil)})
	m.own.MustRegister(&shardCollector{
		g: g,
		held: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "shards_held"),
			"Shards of the group this replica claims now, draining ones included.", nil, nil),
		draining: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "shards_draining"),
			"Shards this replica claims and drains: its app is to let them go (POST /shards/{i}/drained).", nil, nil),
		members: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "shard_members"),
			"Live members of the group as this replica sees them, itself included unless it is leaving.", nil, nil),
		moves: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "shard_moves_total"),
			"Shard moves at this replica, by event: acquired (a term begun on a shard here), drain_started "+
				"(a shard held here began to drain, to move or on a graceful stop), released (a draining shard "+
				"released, on the app's acknowledgement or at the drain timeout).", []string{"event"}, nil),
	})
}

// shardStatusCollector is leader_election_master_status of every shard.
type shardStatusCollector struct {
	g    ShardGroup
	desc *prometheus.Desc
}

func (c *shardStatusCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *shardStatusCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.g.Status()
	held := make([]bool, s.Shards)
	for _, h := range s.Held {
		if h.Shard >= 0 && h.Shard < s.Shards {
			held[h.Shard] = true
		}
	}
	for i, h := range held {
		v := 0.0
		if h {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, shardgroup.ShardRecord(s.Group, i))
	}
}

// shardCollector is the leader_sidecar_* metrics of shard mode.
type shardCollector struct {
	g                              ShardGroup
	held, draining, members, moves *prometheus.Desc
}

func (c *shardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.held
	ch <- c.draining
	ch <- c.members
	ch <- c.moves
}

func (c *shardCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.g.Status()
	draining := 0
	for _, h := range s.Held {
		if h.Draining {
			draining++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(len(s.Held)))
	ch <- prometheus.MustNewConstMetric(c.draining, prometheus.GaugeValue, float64(draining))
	ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(len(s.Members)))
	mv := c.g.Moves()
	for _, e := range []struct {
		event string
		n     int64
	}{{moveAcquired, mv.Acquired}, {moveDrainStarted, mv.DrainsStarted}, {moveReleased, mv.Released}} {
		ch <- prometheus.MustNewConstMetric(c.moves, prometheus.CounterValue, float64(e.n), e.event)
	}
}
