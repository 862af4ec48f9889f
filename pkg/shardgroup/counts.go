package shardgroup

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

// This file is the replica's side of the rule between shard counts
// (shard.StanceOf): the count it writes into every record, what it sees
// of other counts, and the Yielded mark of its member record.

// marked is a shard record's backend that writes the replica's count
// into every record its elector writes (backend.GroupMark), so that
// replicas of another count see whose count holds it.
type marked struct {
	backend.Backend
	mark backend.GroupMark
}

func (m marked) Create(ctx context.Context, rec backend.Record) (backend.Version, error) {
	rec.Group = m.mark
	return m.Backend.Create(ctx, rec)
}

func (m marked) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	rec.Group = m.mark
	return m.Backend.Update(ctx, prev, rec)
}

// CreateFirst is only reached when the store is a backend.FirstCreator
// (backend.Wrapped).
func (m marked) CreateFirst(ctx context.Context, rec backend.Record) (backend.Version, error) {
	rec.Group = m.mark
	return m.Backend.(backend.FirstCreator).CreateFirst(ctx, rec)
}

// markShard returns b writing count into every record.
func markShard(b backend.Backend, count int) backend.Backend {
	return backend.Wrapped(b, marked{Backend: b, mark: backend.GroupMark{Shards: count}})
}

// shardNumber is i when name is ShardRecord(group, i), else -1.
func shardNumber(group, name string) int {
	rest, ok := strings.CutPrefix(name, group+"-shard-")
	if !ok || rest == "" || rest != strings.TrimLeft(rest, "+-") {
		return -1
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || strconv.Itoa(i) != rest {
		return -1
	}
	return i
}

// seenShard is a shard record, of any count, as this replica last listed
// it.
type seenShard struct {
	version backend.Version
	rec     backend.Record
	// since is when this replica first saw that version, on its clock.
	since time.Time
}

// liveHolderAt reports whether s names a holder whose claim may still
// run at now: it names one, and this replica has seen the record
// unchanged for less than its lease duration (never less than its own),
// as the election judges expiry.
func (g *Group) liveHolderAt(s seenShard, now time.Time) bool {
	d := max(time.Duration(s.rec.LeaseDurationSeconds)*time.Second, g.cfg.Election.LeaseDuration)
	return s.rec.HolderIdentity != "" && now.Sub(s.since) < d
}

// othersLocked are the live members and live shard holders of another
// count than this replica's, as it sees them at now.
func (g *Group) othersLocked(now time.Time) []shard.OtherCount {
	count := len(g.electors)
	var out []shard.OtherCount
	for _, m := range g.seen {
		if m.mark.Shards != count && g.liveAtLocked(m, now) {
			out = append(out, shard.OtherCount{Count: m.mark.Shards, Yielded: m.mark.Yielded})
		}
	}
	for _, s := range g.seenShards {
		if s.rec.Group.Shards != count && g.liveHolderAt(s, now) {
			out = append(out, shard.OtherCount{Count: s.rec.Group.Shards, Holder: true})
		}
	}
	return out
}

// stanceLocked is this replica's stance at now (shard.StanceOf), and
// the counts it sees besides its own.
func (g *Group) stanceLocked(now time.Time) (shard.Stance, []int) {
	others := g.othersLocked(now)
	var counts []int
	for _, o := range others {
		counts = append(counts, o.Count)
	}
	return shard.StanceOf(len(g.electors), others), counts
}

// idle reports whether this replica claims no shard and contends for
// none: what its member record's Yielded mark says.
func (g *Group) idle() bool {
	for _, e := range g.electors {
		if !e.SittingOut() || e.Status().Leader {
			return false
		}
	}
	return true
}

// sitOutContenders takes out of their elections the electors that contend
// for a shard they do not hold.
func (g *Group) sitOutContenders(ctx context.Context) {
	for _, e := range g.electors {
		if st := e.Status(); !e.SittingOut() && !st.Leader && st.Holder != g.cfg.Identity {
			g.sitOut(ctx, e, "stopped contending")
		}
	}
}
