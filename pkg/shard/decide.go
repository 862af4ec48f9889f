package shard

import (
	"errors"
	"fmt"
	"time"
)

// This file is one replica's decision: from what it sees of the members
// and of every shard's record, what it does next. Decide is a pure
// function, like the election's rules, so every rule is a row of a table
// test; the election of each shard (package election) still decides
// whether a write may be made.

// State is a shard's record as a replica sees it.
type State int

const (
	// Free: the record names no holder (released, emptied, or missing).
	Free State = iota
	// Held: the record names a holder whose claim is live.
	Held
	// Draining: the record names a live holder that is giving the shard
	// up: it waits for its application to let go, then releases.
	Draining
	// Expired: the record names a holder, but has been seen unchanged for
	// a lease duration: the election's rules let another take it over.
	Expired
)

func (s State) String() string {
	switch s {
	case Free:
		return "free"
	case Held:
		return "held"
	case Draining:
		return "draining"
	case Expired:
		return "expired"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// ShardView is what a replica knows of one shard.
type ShardView struct {
	// Holder is the identity the record names; "" when Free.
	Holder string
	State  State
	// DrainingSince is, on a shard this replica holds and drains, when it
	// marked the shard draining, on its own clock.
	DrainingSince time.Time
	// Drained is set, on a shard this replica drains, once its
	// application acknowledged that it let the shard go.
	Drained bool
}

// Member is a live member as a replica sees it.
type Member struct {
	Identity string
	// LiveSince is when this replica first saw the member live, on its
	// own clock.
	LiveSince time.Time
}

// View is everything one replica knows when it decides.
type View struct {
	// Self is the replica's identity.
	Self string
	// Leaving is set once the replica has left the membership on its way
	// out (a graceful stop): it gives up every shard and takes none.
	Leaving bool
	// Members are the members this replica sees live. Self counts as one
	// unless Leaving, whether or not it is listed: its own record may not
	// be visible to it yet.
	Members []Member
	// Shards is every shard of the group, by number.
	Shards []ShardView
	// Now is the replica's clock.
	Now time.Time
}

// Policy holds the timings of a group's moves.
type Policy struct {
	// RebalanceDelay is how long a member must have been live before a
	// shard held by another replica is drained towards it: a newcomer
	// that comes and goes moves nothing. Shards that are free it takes at
	// once.
	RebalanceDelay time.Duration
	// DrainTimeout is how long a draining shard waits for the
	// application's acknowledgement before it is released anyway.
	DrainTimeout time.Duration
}

// ActionKind is what a replica does with one shard.
type ActionKind int

const (
	// Acquire: contend for the shard (its election may take it: it is
	// free, or its holder's claim has expired).
	Acquire ActionKind = iota + 1
	// Drain: mark a shard this replica holds as draining and tell its
	// application to let it go.
	Drain
	// Undrain: keep a shard this replica was draining: it is this
	// replica's again.
	Undrain
	// Release: write the release shape over a drained shard, so that its
	// target takes it at once.
	Release
)

func (k ActionKind) String() string {
	switch k {
	case Acquire:
		return "acquire"
	case Drain:
		return "drain"
	case Undrain:
		return "undrain"
	case Release:
		return "release"
	}
	return fmt.Sprintf("ActionKind(%d)", int(k))
}

// Action is one thing Decide asks of a replica.
type Action struct {
	Shard int
	Kind  ActionKind
	// Target is the member the table gives the shard to, "" when the
	// replica is leaving and sees no other member.
	Target string
}

// Decide returns what the replica whose view v is does next, at most one
// action per shard, in shard order, following these rules:
//
//   - The table is Assign over the members v sees (Self included unless
//     Leaving); every replica that sees the same members computes the
//     same table.
//   - Acquire a shard whose target is Self and that is Free or Expired
//     (whoever the record names). A shard Held or Draining by another
//     holder is never acquired, whatever the table says.
//   - Drain a shard Self holds whose target is another member, once that
//     member has been live for p.RebalanceDelay; at once when Leaving.
//   - Undrain a shard Self drains whose target is Self again.
//   - Release a shard Self drains once its application acknowledged it
//     (Drained) or p.DrainTimeout has passed since DrainingSince.
//
// Views that disagree can only delay a move: no rule takes a shard from a
// live holder, and the election of each shard lets at most one holder
// claim it. Decide returns an error, and no actions, for a view it cannot
// judge (a bad shard count, an empty identity, an unknown state).
func Decide(v View, p Policy) ([]Action, error) {
	if err := v.check(); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(v.Members)+1)
	since := map[string]time.Time{}
	for _, m := range v.Members {
		if v.Leaving && m.Identity == v.Self {
			continue
		}
		ids = append(ids, m.Identity)
		if t, ok := since[m.Identity]; !ok || m.LiveSince.Before(t) {
			since[m.Identity] = m.LiveSince
		}
	}
	if !v.Leaving {
		ids = append(ids, v.Self)
	}
	table, err := Assign(len(v.Shards), ids)
	if err != nil {
		return nil, err
	}
	var out []Action
	for i, s := range v.Shards {
		target := table[i]
		mine := target == v.Self && !v.Leaving
		act := func(k ActionKind) { out = append(out, Action{Shard: i, Kind: k, Target: target}) }
		switch {
		case s.State == Free || s.State == Expired:
			if mine {
				act(Acquire)
			}
		case s.Holder != v.Self:
			// Held or Draining by another: never taken.
		case s.State == Held:
			if !mine && (v.Leaving || target == "" || !v.Now.Before(since[target].Add(p.RebalanceDelay))) {
				act(Drain)
			}
		case s.State == Draining:
			switch {
			case mine:
				act(Undrain)
			case s.Drained || !v.Now.Before(s.DrainingSince.Add(p.DrainTimeout)):
				act(Release)
			}
		}
	}
	return out, nil
}

func (v View) check() error {
	if v.Self == "" {
		return errors.New("the replica's identity must not be empty")
	}
	if err := CheckCount(len(v.Shards)); err != nil {
		return err
	}
	for _, m := range v.Members {
		if m.Identity == "" {
			return errors.New("a member's identity must not be empty")
		}
	}
	for i, s := range v.Shards {
		switch {
		case s.State < Free || s.State > Expired:
			return fmt.Errorf("shard %d: unknown state %d", i, int(s.State))
		case s.State == Free && s.Holder != "":
			return fmt.Errorf("shard %d: free, yet its record names %q", i, s.Holder)
		case s.State != Free && s.Holder == "":
			return fmt.Errorf("shard %d: %s, yet its record names no holder", i, s.State)
		}
	}
	return nil
}
