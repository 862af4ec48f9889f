package shardgroup

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

// Status is this replica's view of the group at one instant.
type Status struct {
	Group    string
	Identity string
	// Shards is the number of shards.
	Shards int
	// Members are the live members this replica sees, itself included
	// unless it is leaving, sorted.
	Members []string
	// FairShare is ceil(Shards/len(Members)), the most shards the table
	// gives a member.
	FairShare int
	// Leaving is set once a graceful stop began.
	Leaving bool
	// Held are the shards this replica claims now, by number.
	Held []Held
}

// Held is a shard this replica claims.
type Held struct {
	Shard int
	// Token is the fencing token of this replica's term on the shard.
	Token int64
	// ValidUntil is when the claim ends unless renewed first.
	ValidUntil time.Time
	// Draining is set while the shard is being given up: the application
	// is to let it go and acknowledge (Drained).
	Draining bool
	Range    shard.Range
}

// ShardStatus is one shard as this replica sees it.
type ShardStatus struct {
	// Held is set while this replica claims the shard; Token and Draining
	// are then those of its term.
	Held     bool
	Token    int64
	Draining bool
	// Holder is the holder the shard's record names as last seen; "" for
	// none (released, missing, or not seen yet).
	Holder string
	// Released is the token of the last term of this shard that this
	// replica released (after a drain, or on a graceful stop); 0 if none.
	// A term of this replica that ended with another token was lost: it
	// lapsed, or the record names another holder.
	Released int64
}

// ErrNoSuchShard is returned for a shard number outside the group.
var ErrNoSuchShard = errors.New("no such shard")

// ErrNotDraining is returned by Drained for a shard this replica does not
// drain.
var ErrNotDraining = errors.New("the shard is not draining here")

// ErrOtherTerm is returned by Drained for an acknowledgement that names
// another term than the one that drains.
var ErrOtherTerm = errors.New("the acknowledgement names another term")

// Status reports the group at this instant, from memory: whether a shard
// is claimed is each elector's Status, computed now.
func (g *Group) Status() Status {
	now := g.cfg.Election.Clock.Now()
	g.mu.Lock()
	live := g.liveLocked(now)
	leaving := g.leaving
	draining := make(map[int]bool, len(g.draining))
	for i := range g.draining {
		draining[i] = true
	}
	g.mu.Unlock()
	s := Status{Group: g.cfg.Group, Identity: g.cfg.Identity, Shards: len(g.electors), Leaving: leaving, Held: []Held{}}
	for _, m := range live {
		s.Members = append(s.Members, m.Identity)
	}
	if !leaving {
		s.Members = append(s.Members, g.cfg.Identity)
	}
	slices.Sort(s.Members)
	s.Members = slices.Compact(s.Members)
	s.FairShare = shard.FairShare(s.Shards, len(s.Members))
	for i, e := range g.electors {
		st := e.Status()
		if !st.Leader {
			continue
		}
		r, _ := shard.RangeOf(i, s.Shards) // i is in range
		s.Held = append(s.Held, Held{Shard: i, Token: st.Token, ValidUntil: st.ValidUntil, Draining: draining[i], Range: r})
	}
	return s
}

// Shard reports shard i as this replica sees it now.
func (g *Group) Shard(i int) (ShardStatus, error) {
	if i < 0 || i >= len(g.electors) {
		return ShardStatus{}, fmt.Errorf("%w: %d (the group has %d, from 0)", ErrNoSuchShard, i, len(g.electors))
	}
	st := g.electors[i].Status()
	g.mu.Lock()
	_, draining := g.draining[i]
	released := g.releasedTokens[i]
	g.mu.Unlock()
	out := ShardStatus{Holder: st.Holder, Released: released}
	if st.Leader {
		out.Held, out.Token, out.Draining = true, st.Token, draining
	}
	return out, nil
}

// Drained records the application's acknowledgement that it let shard i
// go in the term of token; the shard is released at once. Token 0 names
// no term: it acknowledges whichever term drains (what an application
// that does not send the token gets). It fails, and nothing changes, with
// ErrNotDraining when this replica does not drain the shard, and with
// ErrOtherTerm when token names another term than the one that drains
// (a late acknowledgement of an earlier term's drain).
func (g *Group) Drained(i int, token int64) error {
	if i < 0 || i >= len(g.electors) {
		return fmt.Errorf("%w: %d (the group has %d, from 0)", ErrNoSuchShard, i, len(g.electors))
	}
	st := g.electors[i].Status()
	g.mu.Lock()
	_, draining := g.draining[i]
	draining = draining && st.Leader
	other := draining && token != 0 && token != st.Token
	if draining && !other {
		g.drained[i] = true
	}
	g.mu.Unlock()
	switch {
	case !draining:
		return fmt.Errorf("%w: shard %d", ErrNotDraining, i)
	case other:
		return fmt.Errorf("%w: shard %d drains in the term of token %d, and the acknowledgement names token %d; nothing changes",
			ErrOtherTerm, i, st.Token, token)
	}
	g.poke()
	return nil
}

// Healthy reports whether no shard's election loop is wedged.
func (g *Group) Healthy() bool {
	for _, e := range g.electors {
		if !e.Healthy() {
			return false
		}
	}
	return true
}

// ReachedStore reports whether every shard's elector has reached the
// store.
func (g *Group) ReachedStore() bool {
	for _, e := range g.electors {
		if !e.Status().ReachedStore {
			return false
		}
	}
	return true
}

// Moves counts the moves of shards to and from this replica since New.
type Moves struct {
	// Acquired counts the terms this replica began on a shard (each a
	// shard's election won, so a new token).
	Acquired int64
	// DrainsStarted counts the shards this replica began to drain (to
	// move to another member, or on a graceful stop); a drain undone
	// before its release counts too.
	DrainsStarted int64
	// Released counts the draining shards this replica released, on the
	// application's acknowledgement or at the drain timeout.
	Released int64
}

// Moves reports the moves so far; every count only grows.
func (g *Group) Moves() Moves {
	return Moves{Acquired: g.acquired.Load(), DrainsStarted: g.drainsStarted.Load(), Released: g.released.Load()}
}
