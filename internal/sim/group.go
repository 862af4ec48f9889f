package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

// A shard group under the simulator (Options.Shards > 0): Options.Candidates
// replicas, each a process with one clock, a member record and one
// elector per shard. Every shard is an election of its own on its own
// record, run by package election's rules, with every fault the lone
// election has on its record (deleted, edited by hand), the store's
// latency, failures and outages, and change signals delayed and dropped.
// Which elections a replica takes part in is decided by shard.Decide, from
// the replica's own view:
//
//   - members: a replica renews its member record every third of a lease
//     and reads every member record every retry period (a read that may
//     fail, arrive late, or, during a view-skew fault, not arrive at all);
//     a member is live while its record has changed within a lease
//     duration by the reader's clock;
//   - shards: the holder each of its electors last saw; a shard is
//     expired once its elector has seen the record unchanged for a lease
//     (election.Elector.HolderExpired), held by its holder until then,
//     whether or not the holder is a live member.
//
// Acquire makes the shard's elector rejoin its election, and a shard that
// is neither acquired nor held sits out; drain is remembered by the
// holder, whose application acknowledges it after a random delay (at
// times after the drain timeout); release is SitOut, which writes the
// release shape. Replicas pause, crash (a new one starts later), stop
// gracefully (they leave the membership first, drain, release, stop), and
// join.
//
// Besides each shard's invariants (checker: at most one holder at any
// instant, tokens rising, the guard never accepting a stale term), the
// group checks that once faults stop every shard is held by the member
// the table over the live replicas gives it, so that no member holds more
// than its share, and that it stays so: the table converges and moves
// stop.

// Timings of the group's moves in the simulator: shorter than the
// sidecar's defaults (30s each), so that schedules reach the end of moves.
const (
	simRebalanceDelay = 10 * time.Second
	simDrainTimeout   = 10 * time.Second
)

type group struct {
	w        *world
	n        int
	policy   shard.Policy
	replicas []*replica
	started  int
	// members are the member records: identity -> version; a record that
	// is missing is not there.
	members map[string]int64
	// moves counts shards released to move by a holder that claimed
	// them; lastUnsettled is the last
	// instant the table was not held as assigned (see settled).
	moves         int
	lastUnsettled time.Duration
	// The table over the running replicas as last computed (see table),
	// and scratch space for their identities.
	assigned               shard.Table
	assignErr              error
	assignedTo, runningIDs []string
	// counts is the state of a schedule with a count change (counts.go);
	// nil without one.
	counts *groupCounts
}

type replica struct {
	g           *group
	id          string
	rate        float64
	clock       *driftingClock
	cands       []*candidate // by shard
	crashed     bool
	leaving     bool
	gone        bool
	pausedUntil time.Duration
	blindUntil  time.Duration // member reads fail until then
	leaveBy     time.Duration // a leaving replica stops by then, drained or not
	seen        map[string]seenMember
	draining    map[int]time.Time
	drained     map[int]bool
	// n is the replica's count; counts its view of the other counts, nil
	// in a schedule without a count change (counts.go).
	n      int
	counts *replicaCounts
}

// seenMember is a member record as one replica last read it.
type seenMember struct {
	version          int64
	since, liveSince time.Time // on the reader's clock
}

// groupQuiet and groupDuration are the group's defaults: moves take a
// rebalance delay and a drain after the membership has settled.
const (
	groupDuration = 5 * time.Minute
	groupQuiet    = 200 * time.Second
)

func runGroup(w *world) (Result, error) {
	g := &group{
		w:       w,
		n:       w.opts.Shards,
		policy:  shard.Policy{RebalanceDelay: simRebalanceDelay, DrainTimeout: simDrainTimeout},
		members: map[string]int64{},
	}
	w.group = g
	contests := g.n
	if w.opts.ShardsTo > 0 && w.opts.ShardsTo != g.n {
		g.counts = &groupCounts{count: g.n, marks: map[string]memberMark{}, byID: map[string]*replica{}}
		contests = max(g.n, w.opts.ShardsTo)
	}
	for i := range contests {
		el := &contest{shard: i, touched: true}
		el.store.provesNeverCreated = w.opts.Seed%2 != 0
		w.elections = append(w.elections, el)
	}
	w.logf("schedule %d: %d replicas over %d shards, renew interval %v, snapshots %v, store %+v, proves a record never created %v",
		w.opts.Seed, w.opts.Candidates, g.n, w.renewInterval, w.snapshots, w.profile, w.opts.Seed%2 != 0)
	for range w.opts.Candidates {
		w.at(w.between(0, 5*time.Second), func() { g.startReplica(w) })
	}
	scheduleGroupFaults(w)
	if g.counts != nil {
		scheduleCountChange(w)
	}
	w.run()
	r := w.result()
	r.Moves = g.moves
	r.SettledAfter = max(0, g.lastUnsettled-w.quietFrom)
	if g.counts != nil {
		r.CountChanges = g.counts.changes
	}
	return r, nil
}

func (g *group) startReplica(w *world) *replica {
	g.started++
	r := &replica{
		g:        g,
		id:       fmt.Sprintf("r%d", g.started),
		rate:     1 + w.opts.Drift*(2*w.rng.Float64()-1),
		seen:     map[string]seenMember{},
		draining: map[int]time.Time{},
		drained:  map[int]bool{},
	}
	r.clock = &driftingClock{w: w, rate: r.rate, started: w.now}
	r.n = g.n
	if g.counts != nil {
		r.n = g.counts.count
		g.counts.join(r)
	}
	for i, el := range w.elections[:r.n] {
		c := w.newCandidate(el, r.id, fmt.Sprintf("%s/%d", r.id, i), r.rate)
		if c.e == nil {
			return r
		}
		if g.counts != nil {
			c.gate = r.gate(c)
		}
		// Not a member of any election until Decide says so; SitOut
		// writes nothing while the candidate has seen no record.
		_, _ = c.e.SitOut(background, "not its shard")
		r.cands = append(r.cands, c)
		c.wake()
	}
	g.replicas = append(g.replicas, r)
	g.members[r.id]++
	w.logf("%s joins the group (clock rate %.4f)", r.id, r.rate)
	r.every(w, w.opts.LeaseDuration/3, r.renewMember)
	r.every(w, w.opts.RetryPeriod, r.tick)
	return r
}

// every runs fn every d on the replica's clock while it runs.
func (r *replica) every(w *world, d time.Duration, fn func(w *world)) {
	var loop func()
	loop = func() {
		r.whenRunning(w, func() {
			fn(w)
			w.after(time.Duration(float64(d)/r.rate), loop)
		})
	}
	w.after(time.Duration(float64(d)/r.rate), loop)
}

// whenRunning runs fn now, or when a pause ends; never once the process
// is gone.
func (r *replica) whenRunning(w *world, fn func()) {
	switch {
	case r.crashed || r.gone:
	case w.now < r.pausedUntil:
		w.at(r.pausedUntil, func() { r.whenRunning(w, fn) })
	default:
		fn()
	}
}

// failing reports whether a request now fails, as a store request would.
func failing(w *world) bool {
	p := w.currentProfile()
	return w.now < p.outageUntil || w.chance(p.failChance)
}

// renewMember updates the replica's member record, which must exist (a
// record deleted as it left is not brought back by a late renewal).
func (r *replica) renewMember(w *world) {
	if r.counts != nil && r.counts.leaving && !r.counts.memberGone && !failing(w) {
		r.writeMark(w, r.counts.yielded) // a leaving member stays live while it holds
		return
	}
	if r.leaving || failing(w) {
		return
	}
	if r.counts != nil {
		r.writeMark(w, r.counts.yielded)
		return
	}
	w.after(w.between(0, w.currentProfile().latency), func() {
		if _, ok := r.g.members[r.id]; ok {
			r.g.members[r.id]++
		}
	})
}

// tick reads the member records, then decides and acts on what it sees.
func (r *replica) tick(w *world) {
	p := w.currentProfile()
	if w.now < r.blindUntil || failing(w) {
		r.act(w)
		return
	}
	snapshot := maps(r.g.members)
	var others countSnapshot
	if r.counts != nil {
		others = r.g.counts.snapshot(w)
	}
	w.after(w.between(0, 2*p.latency), func() {
		r.whenRunning(w, func() {
			r.read(snapshot)
			if r.counts != nil {
				r.readCounts(others)
			}
			r.act(w)
		})
	})
}

func maps(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// read takes in a read of every member record.
func (r *replica) read(records map[string]int64) {
	now := r.clock.Now()
	for id := range r.seen {
		if _, ok := records[id]; !ok {
			delete(r.seen, id)
		}
	}
	for id, v := range records {
		s, ok := r.seen[id]
		switch {
		case !ok:
			r.seen[id] = seenMember{version: v, since: now, liveSince: now}
		case s.version != v:
			if !r.live(s, now) {
				s.liveSince = now
			}
			s.version, s.since = v, now
			r.seen[id] = s
		}
	}
}

func (r *replica) live(s seenMember, now time.Time) bool {
	return now.Sub(s.since) < r.g.w.opts.LeaseDuration
}

// view is what the replica sees now, as shard.Decide takes it.
func (r *replica) view() shard.View {
	now := r.clock.Now()
	v := shard.View{Self: r.id, Leaving: r.leaving, Now: now,
		Members: make([]shard.Member, 0, len(r.seen)), Shards: make([]shard.ShardView, 0, len(r.cands))}
	if r.counts != nil && r.stance(now) == shard.Yield {
		v.Leaving = true
	}
	for id, s := range r.seen {
		if r.live(s, now) && (r.counts == nil || r.sameCount(id)) {
			v.Members = append(v.Members, shard.Member{Identity: id, LiveSince: s.liveSince})
		}
	}
	slices.SortFunc(v.Members, func(a, b shard.Member) int { return strings.Compare(a.Identity, b.Identity) })
	for i, c := range r.cands {
		holder := c.e.Status().Holder
		s := shard.ShardView{Holder: holder}
		switch {
		case holder == "":
			s.State = shard.Free
		case c.e.HolderExpired():
			s.State = shard.Expired
		case holder == r.id:
			s.State = shard.Held
			if since, ok := r.draining[i]; ok {
				s.State, s.DrainingSince, s.Drained = shard.Draining, since, r.drained[i]
			}
		default:
			s.State = shard.Held
		}
		v.Shards = append(v.Shards, s)
	}
	return v
}

// act carries out shard.Decide's actions; a shard it neither acquires nor
// holds sits out of its election.
func (r *replica) act(w *world) {
	v := r.view()
	actions, err := shard.Decide(v, r.g.policy)
	if err != nil {
		w.violate(fmt.Sprintf("%s cannot decide: %v", r.id, err))
		return
	}
	mayTake := r.counts == nil || r.mayTake(v.Now)
	acted := map[int]bool{}
	for _, a := range actions {
		if a.Kind == shard.Acquire && !mayTake {
			continue
		}
		acted[a.Shard] = true
		c := r.cands[a.Shard]
		switch a.Kind {
		case shard.Acquire:
			if c.e.SittingOut() {
				c.el.touched = true
				c.e.Rejoin()
				w.logf("%s contends", c.id)
				if !c.busy && !c.paused() {
					c.wakeGen++
					c.attempt()
				}
			}
		case shard.Drain:
			since := v.Now
			r.draining[a.Shard], r.drained[a.Shard] = since, false
			w.logf("%s drains (target %s)", c.id, a.Target)
			// The application lets go after a while, at times only after
			// the drain timeout.
			w.after(w.between(0, 3*simDrainTimeout/2), func() {
				if r.draining[a.Shard] == since {
					r.drained[a.Shard] = true
				}
			})
		case shard.Undrain:
			delete(r.draining, a.Shard)
			delete(r.drained, a.Shard)
			w.logf("%s keeps its shard", c.id)
		case shard.Release:
			if c.busy || c.paused() {
				continue
			}
			w.logf("%s releases to move (target %q)", c.id, a.Target)
			if c.e.Status().Leader {
				r.g.moves++ // not a record it wrote but never claimed
			}
			delete(r.draining, a.Shard)
			delete(r.drained, a.Shard)
			c.sitOut("moved")
		}
	}
	for i, c := range r.cands {
		if acted[i] || c.e.SittingOut() || v.Shards[i].Holder == r.id || c.busy || c.paused() || c.crashed {
			continue
		}
		w.logf("%s sits out", c.id)
		c.sitOut("not its shard")
	}
	if r.counts != nil {
		r.afterAct(w, v.Now)
	}
	if r.leaving {
		r.finishLeaving(w, v)
	}
}

// finishLeaving stops the replica's electors once it holds no shard (or
// its time to leave is up), and then the process is gone.
func (r *replica) finishLeaving(w *world, v shard.View) {
	holds := slices.ContainsFunc(v.Shards, func(s shard.ShardView) bool { return s.Holder == r.id })
	if holds && w.now < r.leaveBy {
		return
	}
	all := true
	for _, c := range r.cands {
		if !c.crashed && !c.stop() {
			all = false
		}
	}
	if all {
		r.gone = true
		w.logf("%s has left", r.id)
	}
}

// leave is SIGTERM on a replica: it leaves the membership first, then
// drains and releases every shard, then stops.
func (r *replica) leave(w *world) bool {
	if r.crashed || r.gone || r.leaving || w.now < r.pausedUntil {
		return false
	}
	r.leaving = true
	r.leaveBy = w.now + 3*simDrainTimeout
	if r.counts != nil {
		r.leaveOnceIdle(w) // stops contending first
		return true
	}
	delete(r.g.members, r.id)
	return true
}

func (r *replica) crash(w *world) {
	r.crashed = true
	for _, c := range r.cands {
		c.crash()
	}
}

func (r *replica) pause(w *world, d time.Duration) {
	if w.now < r.pausedUntil {
		return
	}
	r.pausedUntil = w.now + d
	for _, c := range r.cands {
		c.pause(d)
	}
}

// running are the replicas that are members: started, not crashed, not
// leaving, not gone.
func (g *group) running() []*replica {
	var out []*replica
	for _, r := range g.replicas {
		if !r.crashed && !r.leaving && !r.gone {
			out = append(out, r)
		}
	}
	return out
}

// settled reports whether every shard is held, by a claim, by the member
// the table over the running replicas gives it; if not, why.
func (g *group) settled(w *world) (bool, string) {
	table, err := g.table()
	if err != nil {
		return false, err.Error()
	}
	for i, el := range w.elections {
		if i >= g.n { // a shard of a count no longer run
			if _, n := leaderOf(el); n != 0 {
				return false, fmt.Sprintf("shard %d of a former count is led", i)
			}
			continue
		}
		if leader, n := leaderOf(el); n != 1 || leader.identity != table[i] {
			var leaders []string
			for _, c := range w.liveOf(el) {
				if c.e.Status().Leader {
					leaders = append(leaders, c.identity)
				}
			}
			return false, fmt.Sprintf("shard %d is led by %v, its target is %s", i, leaders, table[i])
		}
	}
	return true, ""
}

// table is shard.Assign over the running replicas. It depends on their
// set alone, which changes only when a replica starts, crashes or leaves,
// so it is computed again only then.
func (g *group) table() (shard.Table, error) {
	ids := g.runningIDs[:0]
	for _, r := range g.replicas {
		if !r.crashed && !r.leaving && !r.gone && (g.counts == nil || r.n == g.n) {
			ids = append(ids, r.id)
		}
	}
	g.runningIDs = ids
	if g.assigned == nil || !slices.Equal(ids, g.assignedTo) {
		g.assigned, g.assignErr = shard.Assign(g.n, ids)
		g.assignedTo = append(g.assignedTo[:0], ids...)
	}
	return g.assigned, g.assignErr
}

// leaderOf returns a live candidate of el's record that claims it, and
// how many do.
func leaderOf(el *contest) (leader *candidate, n int) {
	for _, c := range el.cands {
		if !c.crashed && c.e.Status().Leader {
			leader, n = c, n+1
		}
	}
	return leader, n
}

// afterEvent keeps lastUnsettled; before faults stop it need not look.
// With a count change it checks at every event that no two replicas
// claim the same keys, and that none contends or claims while its member
// record says Yielded (counts.go).
func (g *group) afterEvent(w *world) {
	if g.counts != nil {
		g.counts.checkKeys(w)
		g.counts.checkYielded(w)
	}
	if w.now < w.quietFrom {
		g.lastUnsettled = w.now
		return
	}
	if !g.heldAsAssigned(w) {
		g.lastUnsettled = w.now
	}
}

// heldAsAssigned is settled without the reason why not. It runs after
// the checker has looked at every touched shard at this event, so each
// shard's one possible leader is the one its checker saw last, and it
// still claims while its clock is before the ValidUntil its checker saw
// (contest.touched).
func (g *group) heldAsAssigned(w *world) bool {
	table, err := g.table()
	if err != nil {
		return false
	}
	for i, el := range w.elections {
		l := el.check.leader
		claims := l != nil && !l.crashed && l.clock.Now().Before(el.check.leaderUntil)
		if i >= g.n {
			if claims {
				return false
			}
			continue
		}
		if !claims || l.identity != table[i] {
			return false
		}
	}
	return true
}

// settleBound is how long after faults stop the table must be held as
// assigned: the lone election's liveness bound (a record deleted or
// edited, a holder crashed), then a lease for member records to expire in
// every view and a retry period to read them, the rebalance delay, a drain
// and its release, with a lease of margin.
func (g *group) settleBound(w *world) time.Duration {
	o := w.opts
	return o.livenessBound() + 2*o.LeaseDuration + 2*o.RetryPeriod + simRebalanceDelay + 3*simDrainTimeout/2
}

func (g *group) atEnd(w *world) {
	if ok, why := g.settled(w); !ok {
		w.violate(fmt.Sprintf("the table is not held as assigned %v after faults stopped: %s", w.now-w.quietFrom, why))
		return
	}
	if after := g.lastUnsettled - w.quietFrom; after > g.settleBound(w) {
		w.violate(fmt.Sprintf("the table settled %v after faults stopped (bound %v)", after, g.settleBound(w)))
	}
}

// pickReplica returns a random running replica, or nil.
func (g *group) pickReplica(w *world) *replica {
	var live []*replica
	for _, r := range g.replicas {
		if !r.crashed && !r.gone && !r.leaving {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[w.rng.IntN(len(live))]
}

var groupFaults = []fault{
	{3, func(w *world) string { // SIGSTOP, then SIGCONT
		r := w.group.pickReplica(w)
		if r == nil {
			return ""
		}
		r.pause(w, w.upToQuiet(w.between(0, 3*w.opts.LeaseDuration)))
		return "pause " + r.id
	}},
	{2, func(w *world) string { // kill -9, then a new process
		r := w.group.pickReplica(w)
		if r == nil {
			return ""
		}
		r.crash(w)
		w.after(w.upToQuiet(w.between(0, 2*w.opts.LeaseDuration)), func() { w.group.startReplica(w) })
		return "crash " + r.id
	}},
	{2, func(w *world) string { // SIGTERM, then a new process
		r := w.group.pickReplica(w)
		if r == nil || !r.leave(w) {
			return ""
		}
		w.after(w.upToQuiet(w.between(0, 2*w.opts.LeaseDuration)), func() { w.group.startReplica(w) })
		return "stop " + r.id
	}},
	{1, func(w *world) string { // scale up by one, for a while
		if len(w.group.running()) > w.opts.Candidates {
			return ""
		}
		r := w.group.startReplica(w)
		w.after(w.upToQuiet(w.between(0, 4*w.opts.LeaseDuration)), func() { r.leave(w) })
		return "scale up: " + r.id
	}},
	{2, func(w *world) string { // member reads fail for a while: a stale view
		r := w.group.pickReplica(w)
		if r == nil {
			return ""
		}
		r.blindUntil = w.now + w.upToQuiet(w.between(0, 2*w.opts.LeaseDuration))
		return fmt.Sprintf("%s reads no member record until %v", r.id, r.blindUntil)
	}},
	{1, func(w *world) string { return deleteRecord(w, w.elections[w.rng.IntN(len(w.elections))]) }},
	{3, func(w *world) string { return editRecord(w, w.elections[w.rng.IntN(len(w.elections))]) }},
	{1, func(w *world) string { // the store refuses or drops every request
		w.profile.outageUntil = w.now + w.upToQuiet(w.between(0, 3*w.opts.RenewDeadline/2))
		return fmt.Sprintf("store outage until %v", w.profile.outageUntil)
	}},
}

// scheduleGroupFaults spreads the group's faults over the schedule up to
// its quiet tail.
func scheduleGroupFaults(w *world) {
	total := 0
	for _, f := range groupFaults {
		total += f.weight
	}
	for t := w.between(0, 2*w.opts.FaultEvery); t < w.quietFrom; t += w.between(0, 2*w.opts.FaultEvery) {
		n := w.rng.IntN(total)
		for _, f := range groupFaults {
			if n -= f.weight; n < 0 {
				w.at(t, func() {
					if what := f.do(w); what != "" {
						w.logf("FAULT: %s", what)
					}
				})
				break
			}
		}
	}
}

// sitOut runs SitOut as the candidate's activity. Run's loop goes on
// meanwhile and attempts once SitOut lets go of the record: so here, if
// the loop's timer fired or the candidate rejoined during the activity,
// it attempts as soon as the activity ends.
func (c *candidate) sitOut(reason string) {
	c.start(func() { _, _ = c.e.SitOut(background, reason) }, func() {
		if c.wokeBusy || !c.e.SittingOut() {
			c.attempt()
		}
	})
}
