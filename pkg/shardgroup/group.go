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
	// identity.
	seen map[string]seenMember
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
		draining:       map[int]time.Time{},
		drained:        map[int]bool{},
		releasedTokens: map[int]int64{},
		changed:        make(chan struct{}),
	}
	for i, b := range cfg.Shards {
		ec := cfg.Election
		ec.Backend = b
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
			g.writeMember(ctx, g.cfg.Identity)
			renewDue = now.Add(cfg.RenewInterval)
		}
		g.readMembers(ctx)
		g.decide(ctx)
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

// leave is the graceful stop: the member record first, then every shard
// drained and released, each once acknowledged or once the stop drain
// timeout has passed (at once when it is 0); it returns once none is
// held, or the stop drain timeout and a renew deadline have passed (the
// holder has stopped claiming what it could not release by then).
func (g *Group) leave(ctx context.Context, stopped <-chan error) error {
	cfg := g.cfg.Election
	g.mu.Lock()
	g.leaving = true
	g.mu.Unlock()
	g.notify()
	// Only this goroutine reads the policy (act).
	g.policy.DrainTimeout = g.cfg.StopDrainTimeout
	g.log.Info("leaving the group: draining and releasing every shard", "stopDrainTimeout", g.cfg.StopDrainTimeout)
	g.writeMember(ctx, "")
	deadline := cfg.Clock.Now().Add(g.cfg.StopDrainTimeout + cfg.RenewDeadline)
	for {
		g.readMembers(ctx)
		g.decide(ctx)
		g.notify()
		if !g.holdsAny() {
			g.log.Info("left the group")
			return nil
		}
		if !cfg.Clock.Now().Before(deadline) {
			g.log.Warn("left the group holding shards it could not release; they expire")
			return nil
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

// view is what this replica sees now, as shard.Decide takes it.
func (g *Group) view() shard.View {
	now := g.cfg.Election.Clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	v := shard.View{Self: g.cfg.Identity, Leaving: g.leaving, Now: now, Members: g.liveLocked(now)}
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
	return v
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
	v := g.view()
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
