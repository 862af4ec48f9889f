package metrics

import (
	"context"
	"log/slog"
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

type fixedGroup struct {
	status shardgroup.Status
	moves  shardgroup.Moves
}

func (f *fixedGroup) Status() shardgroup.Status { return f.status }
func (f *fixedGroup) Moves() shardgroup.Moves   { return f.moves }

// masterStatus is leader_election_master_status by name, failing t on
// any other label.
func masterStatus(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	f := gather(t, m)["leader_election_master_status"]
	if f == nil || f.GetType() != dto.MetricType_GAUGE {
		t.Fatalf("leader_election_master_status: %v, want a gauge", f)
	}
	for _, s := range f.GetMetric() {
		l := labels(s)
		if len(l) != 1 || l["name"] == "" {
			t.Fatalf("leader_election_master_status labels %v, want only name", l)
		}
		out[l["name"]] = s.GetGauge().GetValue()
	}
	return out
}

// ownValue is the value of the leader_sidecar_ series of family name with
// lease="billing" and the extra label pairs given, failing t unless there
// is exactly one.
func ownValue(t *testing.T, m *Metrics, name string, pairs ...string) float64 {
	t.Helper()
	f := gather(t, m)[name]
	var found []float64
	for _, s := range f.GetMetric() {
		l := labels(s)
		if l["lease"] != "billing" || len(l) != 1+len(pairs)/2 {
			continue
		}
		match := true
		for i := 0; i+1 < len(pairs); i += 2 {
			match = match && l[pairs[i]] == pairs[i+1]
		}
		if match {
			found = append(found, s.GetGauge().GetValue()+s.GetCounter().GetValue())
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d series, want 1 (family %v)", name, pairs, len(found), f)
	}
	return found[0]
}

// Every shard of the group has its leader_election_master_status series
// on every member, 0 unless this replica claims it, so that summing by
// name counts each shard's holders; the gauges and the move counters
// follow the group at scrape time, and the whole passes Prometheus's
// lint (the rules promtool check metrics applies).
func TestShardMetricsFollowTheGroupAtScrapeTime(t *testing.T) {
	m := New(Info{Lease: "billing", Version: "v1", Backend: "lease"})
	g := &fixedGroup{status: shardgroup.Status{Group: "billing", Shards: 4, Members: []string{"a"}}}
	m.WatchShards(g)
	want := map[string]float64{"billing-shard-0": 0, "billing-shard-1": 0, "billing-shard-2": 0, "billing-shard-3": 0}
	if got := masterStatus(t, m); !maps.Equal(got, want) {
		t.Errorf("before any claim: master status %v, want %v", got, want)
	}
	for name, v := range map[string]float64{"leader_sidecar_shards_held": 0, "leader_sidecar_shards_draining": 0, "leader_sidecar_shard_members": 1} {
		if got := ownValue(t, m, name); got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}

	g.status = shardgroup.Status{Group: "billing", Shards: 4, Members: []string{"a", "b", "c"},
		Held: []shardgroup.Held{{Shard: 1, Token: 3}, {Shard: 3, Token: 9, Draining: true}}}
	g.moves = shardgroup.Moves{Acquired: 5, DrainsStarted: 2, Released: 1}
	want["billing-shard-1"], want["billing-shard-3"] = 1, 1
	if got := masterStatus(t, m); !maps.Equal(got, want) {
		t.Errorf("holding 1 and 3: master status %v, want %v", got, want)
	}
	for _, c := range []struct {
		name  string
		pairs []string
		want  float64
	}{
		{"leader_sidecar_shards_held", nil, 2},
		{"leader_sidecar_shards_draining", nil, 1},
		{"leader_sidecar_shard_members", nil, 3},
		{"leader_sidecar_shard_moves_total", []string{"event", "acquired"}, 5},
		{"leader_sidecar_shard_moves_total", []string{"event", "drain_started"}, 2},
		{"leader_sidecar_shard_moves_total", []string{"event", "released"}, 1},
	} {
		if got := ownValue(t, m, c.name, c.pairs...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.pairs, got, c.want)
		}
	}
	if f := gather(t, m)["leader_sidecar_shard_moves_total"]; f.GetType() != dto.MetricType_COUNTER {
		t.Errorf("shard_moves_total is a %v, want a counter", f.GetType())
	}
	problems, err := testutil.GatherAndLint(m.registry)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}

// On a real group (package shardgroup on the memory store), with these
// metrics as the electors' observer: every shard's terms are counted in
// leadership_transitions_total, and the shard gauges go to 1 as the
// replica takes the shards and back to 0 once it has left the group.
func TestShardMetricsOfARunningGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3
		store := memory.NewStore()
		m := New(Info{Lease: "billing", Version: "v1", Backend: "memory"})
		shards := make([]backend.Backend, n)
		for i := range shards {
			shards[i] = m.InstrumentBackend(store.Open(shardgroup.ShardRecord("billing", i)))
		}
		member := store.Open(shardgroup.MemberRecord("billing", "a"))
		g, err := shardgroup.New(shardgroup.Config{
			Group: "billing", Identity: "a", Shards: shards, Member: member, Members: member,
			Election: election.Config{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
				Logger: slog.New(slog.DiscardHandler), Observer: m},
			RebalanceDelay: time.Second, DrainTimeout: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		m.WatchShards(g)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()

		time.Sleep(5 * time.Second)
		for name, v := range masterStatus(t, m) {
			if v != 1 {
				t.Errorf("alone for 5s: %s = %v, want 1", name, v)
			}
		}
		if got := ownValue(t, m, "leader_sidecar_shards_held"); got != n {
			t.Errorf("shards_held = %v, want %d", got, n)
		}
		for _, c := range []struct {
			name  string
			pairs []string
		}{
			{"leader_sidecar_leadership_transitions_total", []string{"reason", "acquired"}},
			{"leader_sidecar_shard_moves_total", []string{"event", "acquired"}},
		} {
			if got := ownValue(t, m, c.name, c.pairs...); got != n {
				t.Errorf("%s%v = %v, want %d", c.name, c.pairs, got, n)
			}
		}

		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for name, v := range masterStatus(t, m) {
			if v != 0 {
				t.Errorf("after leaving: %s = %v, want 0", name, v)
			}
		}
		for _, c := range []struct {
			name  string
			pairs []string
		}{
			{"leader_sidecar_shard_moves_total", []string{"event", "drain_started"}},
			{"leader_sidecar_shard_moves_total", []string{"event", "released"}},
			{"leader_sidecar_leadership_transitions_total", []string{"reason", "released"}},
		} {
			if got := ownValue(t, m, c.name, c.pairs...); got != n {
				t.Errorf("after leaving: %s%v = %v, want %d", c.name, c.pairs, got, n)
			}
		}
		if got := ownValue(t, m, "leader_sidecar_shard_members"); got != 0 {
			t.Errorf("after leaving: shard_members = %v, want 0", got)
		}
	})
}
