package shardgroup

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

// seenMember is a member record as this replica last listed it.
type seenMember struct {
	version backend.Version
	// mark is the record's count and Yielded mark.
	mark backend.GroupMark
	// since is when this replica first saw that version, liveSince when
	// it first saw the member live this time; both on its own clock.
	since, liveSince time.Time
}

// writeMember writes this replica's member record naming holder: its own
// identity to renew it, "" once it has left; marked with the replica's
// count, yielded and leaving. A failed write is retried at the next renewal (after a read, if
// the version it knew is no longer stored).
func (g *Group) writeMember(ctx context.Context, holder string, yielded, leaving bool) error {
	cfg := g.cfg.Election
	ctx, cancel := context.WithTimeout(ctx, cfg.RenewDeadline)
	defer cancel()
	now := cfg.Clock.Now()
	rec := backend.Record{
		HolderIdentity:       holder,
		LeaseDurationSeconds: int32(cfg.LeaseDuration / time.Second),
		AcquireTime:          now,
		RenewTime:            now,
		Group:                backend.GroupMark{Shards: len(g.electors), Yielded: yielded, Leaving: leaving},
	}
	g.mu.Lock()
	prev, since := g.member, g.memberSince
	g.mu.Unlock()
	if holder != "" && !since.IsZero() {
		rec.AcquireTime = since // a renewal keeps the time the member joined
	}
	var err error
	if prev == "" {
		var got backend.Record
		got, prev, err = g.cfg.Member.Get(ctx)
		switch {
		case errors.Is(err, backend.ErrNotFound):
			prev, err = "", nil
		case err == nil && holder != "" && got.HolderIdentity == g.cfg.Identity:
			rec.AcquireTime = got.AcquireTime
		}
	}
	var written backend.Version
	if err == nil && prev == "" {
		written, err = g.cfg.Member.Create(ctx, rec)
	} else if err == nil {
		written, err = g.cfg.Member.Update(ctx, prev, rec)
	}
	g.mu.Lock()
	g.member = written
	if err == nil && holder != "" && g.memberSince.IsZero() {
		g.memberSince = rec.AcquireTime
	}
	if err == nil {
		g.memberShown = written
		if g.memberWritten.IsZero() || now.Sub(g.memberWritten) >= cfg.RenewDeadline {
			// The first write, or one after a gap in which others may
			// have seen the record expire: a list must follow it.
			g.markSeq = g.listSeq
		}
		g.memberWritten = now
	}
	g.mu.Unlock()
	if err != nil {
		g.log.Warn("could not write the member record", "err", err, "leaving", holder == "")
	}
	return err
}

// readMembers lists the group's records, in one list: the member records,
// and the shard records of every count (for the holders of other counts,
// counts.go), and takes in what changed. A member record that names no
// holder, or one whose name is not the member record's of the holder it
// names, is no member. On error the view is kept as it was (members and
// holders whose records stop changing in it expire).
func (g *Group) readMembers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Election.RenewDeadline)
	defer cancel()
	began := g.cfg.Election.Clock.Now()
	listed, err := g.cfg.Members.List(ctx, g.cfg.Group+"-")
	if err != nil {
		g.log.Warn("could not list the group's records", "err", err)
		return
	}
	now := g.cfg.Election.Clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.listedAt = began
	g.listSeq++
	own := MemberRecord(g.cfg.Group, g.cfg.Identity)
	i := slices.IndexFunc(listed, func(l backend.Listed) bool { return l.Name == own })
	g.listShowsMember = g.memberShown != "" && i >= 0 && listed[i].Version == g.memberShown
	g.takeShardsLocked(listed, now)
	prefix := MemberPrefix(g.cfg.Group)
	present, names := map[string]bool{}, map[string]bool{}
	for _, l := range listed {
		if !strings.HasPrefix(l.Name, prefix) {
			continue
		}
		names[l.Name] = true
		id := l.Record.HolderIdentity
		if id == "" || MemberRecord(g.cfg.Group, id) != l.Name {
			continue
		}
		present[id] = true
		s, ok := g.seen[id]
		switch {
		case !ok:
			g.seen[id] = seenMember{version: l.Version, mark: l.Record.Group, since: now, liveSince: now}
		case s.version != l.Version:
			if !g.liveAtLocked(s, now) {
				s.liveSince = now
			}
			s.version, s.mark, s.since = l.Version, l.Record.Group, now
			g.seen[id] = s
		}
	}
	// A member that left (its record names no holder now) is gone at
	// once; one whose record vanished is kept as last seen until that
	// expires.
	for id, s := range g.seen {
		if !present[id] && (names[MemberRecord(g.cfg.Group, id)] || !g.liveAtLocked(s, g.listedAt)) {
			delete(g.seen, id)
		}
	}
}

// takeShardsLocked takes in the shard records of listed, of any count.
func (g *Group) takeShardsLocked(listed []backend.Listed, now time.Time) {
	present := map[string]bool{}
	for _, l := range listed {
		if shardNumber(g.cfg.Group, l.Name) < 0 {
			continue
		}
		present[l.Name] = true
		if s, ok := g.seenShards[l.Name]; !ok || s.version != l.Version {
			g.seenShards[l.Name] = seenShard{version: l.Version, rec: l.Record, since: now}
		}
	}
	// A record that vanished keeps what was last seen of it until that
	// expires: a holder of another count may still claim it.
	for name, s := range g.seenShards {
		if !present[name] && !g.liveHolderAt(s, g.listedAt) {
			delete(g.seenShards, name)
		}
	}
}

// liveAtLocked: a member is live while its record has changed within a
// lease duration, by this replica's clock.
func (g *Group) liveAtLocked(s seenMember, now time.Time) bool {
	return now.Sub(s.since) < g.cfg.Election.LeaseDuration
}

// liveLocked are the members of this replica's count live at now, by
// identity, but those whose record says they yielded or are leaving: they
// take no shard, so the table gives them none. Members of other counts are not in the
// table either (counts.go).
func (g *Group) liveLocked(now time.Time) []shard.Member {
	var out []shard.Member
	for id, s := range g.seen {
		if s.mark.Shards == len(g.electors) && !s.mark.Yielded && !s.mark.Leaving && g.liveAtLocked(s, now) {
			out = append(out, shard.Member{Identity: id, LiveSince: s.liveSince})
		}
	}
	slices.SortFunc(out, func(a, b shard.Member) int { return strings.Compare(a.Identity, b.Identity) })
	return out
}
