package shardgroup

import (
	"context"
	"errors"
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
// replicas of another count see whose count holds it, and passes every
// write by gate first.
type marked struct {
	backend.Backend
	mark backend.GroupMark
	gate func(backend.Record) error
}

func (m marked) Create(ctx context.Context, rec backend.Record) (backend.Version, error) {
	rec.Group = m.mark
	if err := m.gate(rec); err != nil {
		return "", err
	}
	return m.Backend.Create(ctx, rec)
}

func (m marked) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	rec.Group = m.mark
	if err := m.gate(rec); err != nil {
		return "", err
	}
	return m.Backend.Update(ctx, prev, rec)
}

// CreateFirst is only reached when the store is a backend.FirstCreator
// (backend.Wrapped).
func (m marked) CreateFirst(ctx context.Context, rec backend.Record) (backend.Version, error) {
	rec.Group = m.mark
	if err := m.gate(rec); err != nil {
		return "", err
	}
	return m.Backend.(backend.FirstCreator).CreateFirst(ctx, rec)
}

// markShard returns b writing count into every record, each write passed
// by gate first.
func markShard(b backend.Backend, count int, gate func(backend.Record) error) backend.Backend {
	return backend.Wrapped(b, marked{Backend: b, mark: backend.GroupMark{Shards: count}, gate: gate})
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
// run at now: it names one, or names none but is not in the release shape
// (emptied by hand: its last holder is unknown, and waited out as the
// election waits it out), and this replica has seen the record unchanged
// for less than its lease duration (never less than its own), as the
// election judges expiry.
func (g *Group) liveHolderAt(s seenShard, now time.Time) bool {
	d := max(time.Duration(s.rec.LeaseDurationSeconds)*time.Second, g.cfg.Election.LeaseDuration)
	released := s.rec.HolderIdentity == "" && s.rec.LeaseDurationSeconds == 1 && s.rec.AcquireTime.Equal(s.rec.RenewTime)
	return !released && now.Sub(s.since) < d
}

// holderCount is the count of the holder s names: its mark, or 0 (no
// count: not this replica's) for a record that names none.
func holderCount(s seenShard) int {
	if s.rec.HolderIdentity == "" {
		return 0
	}
	return s.rec.Group.Shards
}

// othersLocked are the live members and live shard holders of another
// count than this replica's, as its last list showed them. Their expiry
// is judged at that list, not now: a record of another count expires only
// once a list has seen it unchanged for a lease, never while lists fail
// (a replica that cannot list sees nothing of another count expire, as
// it cannot see a replica of another count come either).
func (g *Group) othersLocked() []shard.OtherCount {
	count, at := len(g.electors), g.listedAt
	var out []shard.OtherCount
	for _, m := range g.seen {
		if m.mark.Shards != count && g.liveAtLocked(m, at) {
			out = append(out, shard.OtherCount{Count: m.mark.Shards, Yielded: m.mark.Yielded})
		}
	}
	for _, s := range g.seenShards {
		if c := holderCount(s); c != count && g.liveHolderAt(s, at) {
			out = append(out, shard.OtherCount{Count: c, Holder: true})
		}
	}
	return out
}

// stanceLocked is this replica's stance (shard.StanceOf), and the counts
// it sees besides its own.
func (g *Group) stanceLocked() (shard.Stance, []int) {
	others := g.othersLocked()
	var counts []int
	for _, o := range others {
		counts = append(counts, o.Count)
	}
	return shard.StanceOf(len(g.electors), others), counts
}

// mayTakeLocked reports whether this replica may begin a term of a shard
// at now: its stance is open, its member record does not say Yielded, was
// written within a renew deadline, a list that began after the last
// write others had to see (markSeq) has succeeded, and the last list
// showed the replica's own last member write that succeeded (so every
// write the store took before it, that one included).
func (g *Group) mayTakeLocked(now time.Time) bool {
	stance, _ := g.stanceLocked()
	fresh := !g.memberWritten.IsZero() && now.Sub(g.memberWritten) < g.cfg.Election.RenewDeadline
	return stance == shard.Open && !g.yielded && !g.leaving && fresh && g.listSeq > g.markSeq && g.listShowsMember
}

// errNotTaking refuses the write of a term this replica may not begin.
var errNotTaking = errors.New("shard group: this replica takes no shard now (a replica of another shard count is live, or its member record is not fresh, or its last list did not show its last member write)")

// gate refuses a write of shard i's elector that would begin a term here
// (naming this replica while its elector does not claim the shard) when
// the replica may not take shards: an elector that was contending goes on
// by itself, and must not win a shard the replica's last look forbids
// (after a pause, say, when other counts may have taken over).
func (g *Group) gate(i int, rec backend.Record) error {
	if rec.HolderIdentity != g.cfg.Identity || g.electors[i].Status().Leader {
		return nil
	}
	now := g.cfg.Election.Clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mayTakeLocked(now) {
		return nil
	}
	return errNotTaking
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
