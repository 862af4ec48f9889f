package shardgroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

// Group is one replica of a shard group. Create it with New, run it with
// Run, read it with Status from any goroutine.
type Group struct {
	cfg      Config
	log      *slog.Logger
	policy   shard.Policy
	electors []*election.Elector
	// acquired, drainsStarted and released count the moves (Moves).
	acquired, drainsStarted, released atomic.Int64
	// wake asks the loop to decide again at once (an acknowledged drain,
	// a shard another replica released).
	wake chan struct{}

	mu sync.Mutex // guards everything below
	// seen are the member records as this replica last listed them, by
	// identity; seenShards the shard records of every count, by name.
	seen       map[string]seenMember
	seenShards map[string]seenShard
	// yielded is set while this replica's member record may say Yielded
	// (counts.go): from before it writes the mark until a write without
	// it succeeded. It takes no shard while set.
	yielded bool
	// stance is the stance the loop last acted on, for logs and Status.
	stance shard.Stance
	// draining are the shards this replica drains, with when it began on
	// its clock; drained those its application acknowledged.
	draining map[int]time.Time
	drained  map[int]bool
	// releasedTokens is, per shard, the token of the last term this
	// replica released (SitOut after a drain), so that a term that ends
	// can be told released from lost.
	releasedTokens map[int]int64
	leaving        bool
	// member is the version of this replica's member record it last
	// wrote; "" when it must read it first.
	member backend.Version
	// memberSince is the acquire time of this replica's member record:
	// when it first wrote the record naming itself; zero before.
	memberSince time.Time
	// memberWritten is when the last write of the member record that
	// succeeded began; zero before. The replica takes no shard while it
	// is older than a renew deadline: a replica of another count that no
	// longer sees it live must not find it contending.
	memberWritten time.Time
	// listedAt is when the last list of the group's records that
	// succeeded began, on this replica's clock; listSeq counts them, and
	// markSeq is listSeq when the member record last changed in a way
	// others must see before this replica takes a shard (its first write,
	// the write that took Yielded out, a write a renew deadline or more
	// after the one before, when others may have seen the record expire):
	// the replica takes shards only after a list that began after it.
	listedAt         time.Time
	listSeq, markSeq int
	// memberShown is the version of the last write of the member record
	// that succeeded; listShowsMember says the last list that succeeded
	// showed the record at that version. A list may be older than the
	// instant it began (lease.Backend's, from a watch that has not yet
	// delivered the latest writes); one that shows the replica's own
	// last write shows every write the store took before it, so the
	// replica takes shards only after such a list. (A later write that
	// did not answer but landed leaves no list showing it until a write
	// succeeds again.)
	memberShown     backend.Version
	listShowsMember bool
	// changed is closed and replaced whenever Status may have changed.
	changed chan struct{}
}

// New checks cfg and builds the replica's electors, one per shard. Nothing
// is read or written before Run.
func New(cfg Config) (*Group, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Group{
		cfg:            cfg,
		log:            cfg.Election.Logger.With("group", cfg.Group),
		policy:         shard.Policy{RebalanceDelay: cfg.RebalanceDelay, DrainTimeout: cfg.DrainTimeout},
		wake:           make(chan struct{}, 1),
		seen:           map[string]seenMember{},
		seenShards:     map[string]seenShard{},
		draining:       map[int]time.Time{},
		drained:        map[int]bool{},
		releasedTokens: map[int]int64{},
		changed:        make(chan struct{}),
	}
	for i, b := range cfg.Shards {
		ec := cfg.Election
		ec.Backend = markShard(b, len(cfg.Shards), func(rec backend.Record) error { return g.gate(i, rec) })
		ec.Identity = cfg.Identity
		ec.ReleaseOnCancel = false
		obs := &shardObserver{acquired: &g.acquired}
		for _, o := range []election.Observer{cfg.Election.Observer, shardObserverOf(cfg, i)} {
			if o != nil {
				obs.next = append(obs.next, o)
			}
		}
		ec.Observer = obs
		ec.Logger = cfg.Election.Logger.With("shard", i)
		e, err := election.New(ec)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		g.electors = append(g.electors, e)
	}
	return g, nil
}

// Run takes part in the group until ctx ends, then leaves it gracefully
// (the package doc), or until a shard's store is lost, which it returns.
func (g *Group) Run(ctx context.Context) error {
	cfg := g.cfg.Election
	// Not a contender in any election until Decide says so; SitOut writes
	// nothing while an elector has seen no record.
	for _, e := range g.electors {
		_, _ = e.SitOut(ctx, "not its shard")
	}
	electorCtx, stopElectors := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan error, len(g.electors))
	var wg sync.WaitGroup
	for _, e := range g.electors {
		wg.Go(func() { stopped <- e.Run(electorCtx) })
		wg.Go(func() { g.relayChanges(electorCtx, e) })
	}
	defer func() {
		stopElectors()
		wg.Wait()
	}()

	var renewDue time.Time
	for ctx.Err() == nil {
		if now := cfg.Clock.Now(); !now.Before(renewDue) {
			_ = g.writeMember(ctx, g.cfg.Identity, g.isYielded(), false)
			renewDue = now.Add(cfg.RenewInterval)
		}
		g.readMembers(ctx)
		if g.isYielded() && g.stanceNow() != shard.Yield {
			// The mark goes first, then a fresh read: a replica of a
			// larger count that took shards on the strength of the
			// mark wrote its member record before it read the mark,
			// so this read sees it, and the stance is yielding again.
			now := cfg.Clock.Now()
			if err := g.writeMember(ctx, g.cfg.Identity, false, false); err == nil {
				g.setYielded(false)
				g.markChanged()
				renewDue = now.Add(cfg.RenewInterval)
				g.readMembers(ctx)
			}
		}
		g.decide(ctx)
		if g.stanceNow() == shard.Yield && !g.isYielded() && g.idle() {
			// Set before the write: a write whose outcome is unknown
			// may have landed.
			now := cfg.Clock.Now()
			g.setYielded(true)
			if err := g.writeMember(ctx, g.cfg.Identity, true, false); err == nil {
				renewDue = now.Add(cfg.RenewInterval)
				g.log.Info("yielded to a larger shard count: holding no shard, contending for none")
			}
		}
		g.notify()
		wait := min(cfg.RetryPeriod, max(0, renewDue.Sub(cfg.Clock.Now())))
		select {
		case <-ctx.Done():
		case err := <-stopped:
			return fmt.Errorf("a shard's election stopped: %w", err)
		case <-g.wake:
		case <-cfg.Clock.After(wait):
		}
	}
	return g.leave(electorCtx, stopped)
}

// leave is the graceful stop: no elector contends any more, the member
// record says leaving (members of its count drop it from their tables at
// once; those of other counts still see a live member while it holds
// anything, even if a shard record vanished), then every shard is drained
// and released, each once acknowledged or once the stop drain timeout has
// passed (at once when it is 0), and the member record names no holder
// once none is held, or the stop drain timeout and a renew deadline have
// passed (the holder has stopped claiming what it could not release by
// then).
func (g *Group) leave(ctx context.Context, stopped <-chan error) error {
	cfg := g.cfg.Election
	g.mu.Lock()
	g.leaving = true
	g.mu.Unlock()
	g.notify()
	// Only this goroutine reads the policy (act).
	g.policy.DrainTimeout = g.cfg.StopDrainTimeout
	g.log.Info("leaving the group: draining and releasing every shard", "stopDrainTimeout", g.cfg.StopDrainTimeout)
	g.sitOutContenders(ctx)
	now := cfg.Clock.Now()
	_ = g.writeMember(ctx, g.cfg.Identity, g.isYielded(), true)
	renewDue, deadline := now.Add(cfg.RenewInterval), now.Add(g.cfg.StopDrainTimeout+cfg.RenewDeadline)
	for {
		g.readMembers(ctx)
		g.decide(ctx)
		g.notify()
		if !g.holdsAny() {
			_ = g.writeMember(ctx, "", g.isYielded(), false)
			g.log.Info("left the group")
			return nil
		}
		if now := cfg.Clock.Now(); !now.Before(deadline) {
			_ = g.writeMember(ctx, "", g.isYielded(), false)
			g.log.Warn("left the group holding shards it could not release; they expire")
			return nil
		} else if !now.Before(renewDue) {
			_ = g.writeMember(ctx, g.cfg.Identity, g.isYielded(), true)
			renewDue = now.Add(cfg.RenewInterval)
		}
		select {
		case err := <-stopped:
			return fmt.Errorf("a shard's election stopped: %w", err)
		case <-g.wake:
		case <-cfg.Clock.After(cfg.RetryPeriod):
		}
	}
}

// Changed returns a channel that is closed the next time Status may have
// changed: a shard's election changed, or the loop decided (every retry
// period at least, as members expire by time alone). Call it again after
// it fires. A claim that lapses by time alone closes it only at the next
// of those; a reader that must notice it waits until Held's ValidUntil.
func (g *Group) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

func (g *Group) notify() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.changed)
	g.changed = make(chan struct{})
}

// relayChanges passes e's changes on to Changed until ctx ends. When
// another replica releases e's shard it also wakes the loop: a release
// mostly follows its holder leaving the group (or being drained towards
// another), which the loop then reads and acts on at once, not a retry
// period later. The views only decide who contends; the election alone
// decides who holds, so an early read can delay a move, never make two
// holders.
func (g *Group) relayChanges(ctx context.Context, e *election.Elector) {
	holder := e.Status().Holder
	for {
		select {
		case <-e.Changed():
			g.notify()
			was := holder
			holder = e.Status().Holder
			if holder == "" && was != "" && was != g.cfg.Identity {
				g.poke()
			}
		case <-ctx.Done():
			return
		}
	}
}

// poke asks the loop to read the members and decide again at once.
func (g *Group) poke() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// holdsAny reports whether this replica claims a shard, or a shard's
// record still names it.
func (g *Group) holdsAny() bool {
	for _, e := range g.electors {
		if s := e.Status(); s.Leader || s.Holder == g.cfg.Identity {
			return true
		}
	}
	return false
}

// isYielded reports whether the member record may say Yielded.
func (g *Group) isYielded() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.yielded
}

func (g *Group) setYielded(y bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.yielded = y
}

// stanceNow is this replica's stance towards other counts now.
func (g *Group) stanceNow() shard.Stance {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, _ := g.stanceLocked()
	return s
}

// markChanged notes that the member record's mark changed: no shard is
// taken before a list that begins after it.
func (g *Group) markChanged() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.markSeq = g.listSeq
}

// view is what this replica sees now, as shard.Decide takes it, and
// whether it may take shards (mayTakeLocked). A yielding replica decides
// as if leaving.
func (g *Group) view() (v shard.View, mayTake bool) {
	now := g.cfg.Election.Clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	stance, counts := g.stanceLocked()
	if stance != g.stance {
		g.log.Info("the shard counts seen changed the replica's stance", "stance", stance.String(), "was", g.stance.String(),
			"shards", len(g.electors), "otherCounts", counts)
		g.stance = stance
	}
	mayTake = g.mayTakeLocked(now)
	v = shard.View{Self: g.cfg.Identity, Leaving: g.leaving || stance == shard.Yield, Now: now, Members: g.liveLocked(now)}
	for i, e := range g.electors {
		holder := e.Status().Holder
		s := shard.ShardView{Holder: holder, State: shard.Held}
		switch {
		case holder == "":
			s.State = shard.Free
		case e.HolderExpired():
			s.State = shard.Expired
		case holder == g.cfg.Identity:
			if since, ok := g.draining[i]; ok {
				s.State, s.DrainingSince, s.Drained = shard.Draining, since, g.drained[i]
			}
		}
		if holder != g.cfg.Identity || s.State == shard.Expired {
			delete(g.draining, i)
			delete(g.drained, i)
		}
		v.Shards = append(v.Shards, s)
	}
	return v, mayTake
}

// decide acts on shard.Decide's actions; when it began drains with a
// drain timeout of 0 it acts again at once, so that those shards are
// released in the same pass, not a retry period later.
func (g *Group) decide(ctx context.Context) {
	if g.act(ctx) && g.policy.DrainTimeout == 0 {
		g.act(ctx)
	}
}

// act carries out shard.Decide's actions, and reports whether it began a
// drain; an elector of a shard it neither acquires nor holds sits out.
func (g *Group) act(ctx context.Context) (drainsBegun bool) {
	v, mayTake := g.view()
	actions, err := shard.Decide(v, g.policy)
	if err != nil {
		g.log.Error("cannot decide", "err", err)
		return false
	}
	contending := 0
	for _, e := range g.electors {
		if !e.SittingOut() {
			contending++
		}
	}
	acted := map[int]bool{}
	for _, a := range actions {
		e := g.electors[a.Shard]
		switch a.Kind {
		case shard.Acquire:
			if !mayTake {
				continue
			}
			if !e.SittingOut() {
				acted[a.Shard] = true
				continue
			}
			if g.cfg.MaxPerMember > 0 && contending >= g.cfg.MaxPerMember {
				continue
			}
			acted[a.Shard] = true
			contending++
			e.Rejoin()
		case shard.Drain:
			acted[a.Shard] = true
			g.mu.Lock()
			g.draining[a.Shard], g.drained[a.Shard] = v.Now, false
			g.mu.Unlock()
			g.drainsStarted.Add(1)
			drainsBegun = true
			g.log.Info("draining a shard", "shard", a.Shard, "target", a.Target)
		case shard.Undrain:
			acted[a.Shard] = true
			g.mu.Lock()
			delete(g.draining, a.Shard)
			delete(g.drained, a.Shard)
			g.mu.Unlock()
			g.log.Info("keeping a shard it was draining", "shard", a.Shard)
		case shard.Release:
			// The draining mark goes once the elector has stepped down
			// (SitOut does that before it writes the release): the shard
			// is shown draining until it is no longer held here, never
			// held again in between.
			acted[a.Shard] = true
			g.mu.Lock()
			drained := g.drained[a.Shard]
			if st := e.Status(); st.Leader {
				g.releasedTokens[a.Shard] = st.Token // before the release, which a reader may see at once
			}
			g.mu.Unlock()
			g.released.Add(1)
			g.log.Info("releasing a drained shard", "shard", a.Shard, "target", a.Target, "acknowledged", drained)
			g.sitOut(ctx, e, "released to move")
			g.mu.Lock()
			delete(g.draining, a.Shard)
			delete(g.drained, a.Shard)
			g.mu.Unlock()
		}
	}
	for i, e := range g.electors {
		if acted[i] || e.SittingOut() || v.Shards[i].Holder == g.cfg.Identity {
			continue
		}
		g.sitOut(ctx, e, "not its shard")
	}
	return drainsBegun
}

// sitOut takes e out of its election, releasing the record if it holds
// it, within a renew deadline.
func (g *Group) sitOut(ctx context.Context, e *election.Elector, reason string) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Election.RenewDeadline)
	defer cancel()
	if _, err := e.SitOut(ctx, reason); err != nil && !errors.Is(err, context.Canceled) {
		g.log.Warn("could not release a shard; it expires instead", "err", err)
	}
}
