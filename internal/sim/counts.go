package sim

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

// A change of the shard count (Options.ShardsTo): at a random time the
// group's count becomes ShardsTo by a rolling update (a replica of the new
// count starts, then each replica of the old count stops and another of
// the new count starts), and in half the schedules it goes back the same
// way later (a rollback); every replica started after a change, crashed
// ones' successors included, has the new count. Every shard record is
// one contest, whatever the count: shard i of N and of N' are the same
// record, as in the sidecar. Each replica follows pkg/shardgroup's rule
// between counts (counts.go there): it reads every member record's count
// and Yielded mark and every shard record's holder (whose count the
// record carries, here the holder's replica's), takes its stance by
// shard.StanceOf, yields as if leaving, marks its member record Yielded
// once idle and takes the mark back by a write before a fresh read, writes
// its member record one write at a time, takes nothing while its member
// record is not fresh, and stops contending before its member record goes
// when it stops. A read is an instant of the store: pkg/shardgroup's lists
// may be older than the instant they begin (from a watch), and it counts
// one only once it shows the replica's own last member write (then it
// shows every write the store took before, all the rule needs of a
// read); lagging lists are not played. At every event the group checks that no two replicas claim
// shards whose key ranges meet, and that no replica contends or claims
// while its member record says Yielded.

// groupCounts is the count state of the group.
type groupCounts struct {
	// count is the count replicas start with now.
	count   int
	marks   map[string]memberMark
	byID    map[string]*replica
	changes int
	// overlaps counts the events at which two replicas claimed the same
	// keys (each a violation).
	overlaps int
	// claims is checkKeys' buffer, kept between events.
	claims []keyClaim
}

// keyClaim is a replica's claim of one shard's keys at an instant.
type keyClaim struct {
	r     *replica
	shard int
	rng   shard.Range
}

// memberMark is the count mark of a member record.
type memberMark struct {
	count            int
	yielded, leaving bool
}

// replicaCounts is one replica's view of the other counts.
type replicaCounts struct {
	marks   map[string]memberMark // of the member records it last read
	shards  map[int]seenShard     // the shard records it last read
	yielded bool                  // its member record may say Yielded
	// unyielding is set while a write taking the mark out is under way,
	// writing while any write of its member record is.
	unyielding, writing bool
	// written is when the last member write that landed began, on its
	// clock; leaveAsked once it stopped contending to leave.
	written    time.Time
	memberGone bool
	// leaving is set once its member record says leaving (it stopped
	// contending); the record goes once it holds nothing.
	leaving bool
	// readAt is the true time of the snapshot it last read; markAt when
	// the last write that changed its mark landed (its first, the one
	// that took Yielded out, or one after a gap of a renew deadline, when
	// others may have seen the record expire): it takes shards only on a
	// read made after that write.
	readAt, markAt time.Duration
	// readClock is when it last read, on its clock: a record of another
	// count expires only once a read has seen it unchanged for a lease,
	// never while reads fail (a replica that cannot read sees nothing
	// expire).
	readClock time.Time
}

// seenShard is a shard record as a replica last read it.
type seenShard struct {
	holder  string
	version int64
	since   time.Time
}

// countSnapshot is a read of every member record's mark and every shard
// record's holder and version.
type countSnapshot struct {
	at      time.Duration
	marks   map[string]memberMark
	holders []string
	vers    []int64
}

func (gc *groupCounts) join(r *replica) {
	gc.byID[r.id] = r
	gc.marks[r.id] = memberMark{count: r.n}
	r.counts = &replicaCounts{marks: map[string]memberMark{}, shards: map[int]seenShard{}, written: r.clock.Now(), markAt: r.g.w.now}
}

func (gc *groupCounts) snapshot(w *world) countSnapshot {
	s := countSnapshot{at: w.now, marks: make(map[string]memberMark, len(gc.marks))}
	for id, m := range gc.marks {
		s.marks[id] = m
	}
	for _, el := range w.elections {
		holder := absent
		if rec := el.store.rec; el.store.present {
			holder = rec.HolderIdentity
			if holder == "" && !(rec.LeaseDurationSeconds == 1 && rec.AcquireTime.Equal(rec.RenewTime)) {
				holder = unknownHolder // emptied by hand: waited out like an expiry
			}
		}
		s.holders = append(s.holders, holder)
		s.vers = append(s.vers, el.store.version)
	}
	return s
}

// absent stands for a record missing from a read, unknownHolder for the
// holder of a record that names none but is not in the release shape.
const (
	absent        = "\x00absent"
	unknownHolder = "\x00unknown"
)

// readCounts takes in a read of the marks and the shard records.
func (r *replica) readCounts(s countSnapshot) {
	now := r.clock.Now()
	r.counts.marks, r.counts.readAt, r.counts.readClock = s.marks, s.at, now
	for i, h := range s.holders {
		if h == absent { // a record that vanished keeps what was last seen of it
			continue
		}
		if old, ok := r.counts.shards[i]; !ok || old.version != s.vers[i] {
			r.counts.shards[i] = seenShard{holder: h, version: s.vers[i], since: now}
		}
	}
}

// countOf is the count a record names for replica id: its member mark, or
// the count of the replica that wrote a shard record naming it.
func (r *replica) countOf(id string) int {
	if o, ok := r.g.counts.byID[id]; ok {
		return o.n
	}
	return 0
}

// sameCount reports whether member id's record carries the replica's
// count and does not say Yielded.
func (r *replica) sameCount(id string) bool {
	m, ok := r.counts.marks[id]
	return ok && m.count == r.n && !m.yielded && !m.leaving
}

// stance is the replica's stance at now (shard.StanceOf).
func (r *replica) stance(now time.Time) shard.Stance {
	var others []shard.OtherCount
	read := r.counts.readClock
	for id, s := range r.seen {
		if m, ok := r.counts.marks[id]; ok && m.count != r.n && r.live(s, read) {
			others = append(others, shard.OtherCount{Count: m.count, Yielded: m.yielded})
		}
	}
	for _, s := range r.counts.shards {
		if s.holder == "" || read.Sub(s.since) >= r.g.w.opts.LeaseDuration {
			continue
		}
		if c := r.countOf(s.holder); c != r.n {
			others = append(others, shard.OtherCount{Count: c, Holder: true})
		}
	}
	return shard.StanceOf(r.n, others)
}

// mayTake: open, not marked Yielded, member record written within a renew
// deadline, not leaving.
func (r *replica) mayTake(now time.Time) bool {
	return !r.leaving && !r.counts.yielded && r.counts.readAt > r.counts.markAt &&
		now.Sub(r.counts.written) < r.g.w.opts.RenewDeadline && r.stance(now) == shard.Open
}

// gate is c's write gate: a write that would begin a term of the
// replica's (naming it while it does not claim the shard) is refused
// unless the replica may take shards now, as pkg/shardgroup's backend
// wrapper refuses it; an elector that contended before a pause cannot take
// a shard before its replica has looked again.
func (r *replica) gate(c *candidate) func(backend.Record) error {
	return func(rec backend.Record) error {
		if rec.HolderIdentity != r.id || c.e.Status().Leader || r.mayTake(r.clock.Now()) {
			return nil
		}
		return errNotTaking
	}
}

var errNotTaking = errors.New("the replica takes no shard now (another count, or its member record is not fresh)")

// idle reports whether the replica claims and contends for nothing.
func (r *replica) idle() bool {
	for _, c := range r.cands {
		if c.busy || !c.e.SittingOut() || c.e.Status().Leader {
			return false
		}
	}
	return true
}

// writeMark writes the member record with the mark yielded, after the
// store's latency; the record must still exist. It reports false, writing
// nothing, while another write of the record is under way: one write at a
// time, in the order they began, as pkg/shardgroup's loop writes its
// record (a write there that does not answer is superseded by version: the
// next one reads the record first, and the late one is refused). Two
// under way at once could land in either order, and one begun before the
// mark was taken back, landing after, would put it back.
func (r *replica) writeMark(w *world, yielded bool) bool {
	if r.counts.writing {
		return false
	}
	r.counts.writing = true
	began := r.clock.Now()
	w.after(w.between(0, w.currentProfile().latency), func() {
		r.counts.writing = false
		if _, ok := r.g.members[r.id]; !ok || r.crashed || r.gone {
			return
		}
		r.g.members[r.id]++
		r.g.counts.marks[r.id] = memberMark{count: r.n, yielded: yielded, leaving: r.counts.leaving}
		if began.Sub(r.counts.written) >= r.g.w.opts.RenewDeadline {
			r.counts.markAt = w.now // a restart: others may have seen it expire
		}
		r.counts.written = began
		if !yielded && r.counts.unyielding {
			r.counts.yielded, r.counts.unyielding, r.counts.markAt = false, false, w.now
			w.logf("%s takes its Yielded mark back", r.id)
		}
	})
	return true
}

// afterAct marks the member record Yielded once the replica yields and is
// idle, and takes the mark back by a write once it no longer yields: the
// next read, after that write, decides whether it may take shards.
func (r *replica) afterAct(w *world, now time.Time) {
	st := r.stance(now)
	switch {
	case r.leaving:
	case st == shard.Yield && !r.counts.yielded && r.idle():
		r.counts.yielded, r.counts.unyielding = true, false
		w.logf("%s yields to a larger count", r.id)
		if !failing(w) {
			r.writeMark(w, true)
		}
	case st != shard.Yield && r.counts.yielded && !r.counts.unyielding && !r.counts.writing && !failing(w):
		r.counts.unyielding = r.writeMark(w, false)
	}
}

// leaveOnceIdle marks the member record leaving once no elector of the
// replica contends for a shard it does not hold, and takes it out once the
// replica holds nothing (or has stopped).
func (r *replica) leaveOnceIdle(w *world) {
	if r.counts.memberGone || r.crashed {
		return
	}
	contends := false
	for _, c := range r.cands {
		if st := c.e.Status(); !c.e.SittingOut() && !st.Leader && st.Holder != r.id {
			contends = true
			if !c.busy && !c.paused() {
				c.sitOut("stopped contending")
			}
		}
	}
	if contends && !r.gone {
		w.after(w.opts.RetryPeriod/5, func() { r.leaveOnceIdle(w) })
		return
	}
	if !r.counts.leaving {
		r.counts.leaving = true
		if m, ok := r.g.counts.marks[r.id]; ok {
			m.leaving = true
			r.g.counts.marks[r.id] = m
			r.g.members[r.id]++
		}
	}
	holds := false
	for _, c := range r.cands {
		if st := c.e.Status(); !c.crashed && (st.Leader || st.Holder == r.id) {
			holds = true
		}
	}
	if holds && !r.gone {
		w.after(w.opts.RetryPeriod/5, func() { r.leaveOnceIdle(w) })
		return
	}
	r.counts.memberGone = true
	delete(r.g.members, r.id)
	delete(r.g.counts.marks, r.id)
}

// checkYielded fails the schedule when a replica contends for a shard or
// claims one while its member record says Yielded: the mark tells
// replicas of a larger count that it holds and contends for nothing, and
// they take keys on the strength of it. It checks that the model keeps
// the mark as pkg/shardgroup does.
func (gc *groupCounts) checkYielded(w *world) {
	for _, r := range w.group.replicas {
		if m := gc.marks[r.id]; !m.yielded || r.crashed || r.gone {
			continue
		}
		for _, c := range r.cands {
			if !c.crashed && (!c.e.SittingOut() || c.e.Status().Leader) {
				w.violate(fmt.Sprintf("%s's member record says Yielded while %s contends or claims", r.id, c.id))
				return
			}
		}
	}
}

// checkKeys fails the schedule when two replicas claim shards whose key
// ranges meet at this instant: the one invariant no election checks, as
// the shards of two counts are different elections.
func (gc *groupCounts) checkKeys(w *world) {
	claims := gc.claims[:0]
	defer func() { gc.claims = claims }()
	for i, el := range w.elections {
		l := el.check.leader
		if l == nil || l.crashed || !l.clock.Now().Before(el.check.leaderUntil) {
			continue
		}
		r := gc.byID[l.identity]
		if r == nil || i >= r.n {
			continue
		}
		rng, _ := shard.RangeOf(i, r.n)
		claims = append(claims, keyClaim{r, i, rng})
	}
	var twice []string
	for i, a := range claims {
		for _, b := range claims[i+1:] {
			if a.r != b.r && (a.rng.Contains(b.rng.Start) || b.rng.Contains(a.rng.Start)) {
				twice = append(twice, fmt.Sprintf("%s holds shard %d of %d, %s shard %d of %d", a.r.id, a.shard, a.r.n, b.r.id, b.shard, b.r.n))
			}
		}
	}
	if len(twice) > 0 {
		gc.overlaps++
		w.violate("keys held twice at once: " + strings.Join(twice, "; "))
	}
}

// scheduleCountChange plays the rolling update to ShardsTo, and in half
// the schedules the rollback, before faults stop.
func scheduleCountChange(w *world) {
	g := w.group
	from, to := g.n, w.opts.ShardsTo
	span := w.quietFrom / 3
	start := w.between(0, span)
	rollback := w.chance(0.5)
	w.at(start, func() { rollingUpdate(w, to, span/2) })
	if rollback {
		w.at(start+span, func() { rollingUpdate(w, from, span/2) })
	}
}

// rollingUpdate changes the count that replicas start with to n, starts
// one, then stops each replica of another count, each followed by a new
// one, over about within.
func rollingUpdate(w *world, n int, within time.Duration) {
	g := w.group
	g.counts.count, g.n = n, n
	g.counts.changes++
	g.assigned = nil
	w.logf("FAULT: rolling update of the shard count to %d", n)
	g.startReplica(w)
	var old []*replica
	for _, r := range g.replicas {
		if r.n != n && !r.crashed && !r.gone && !r.leaving {
			old = append(old, r)
		}
	}
	step := within / time.Duration(len(old)+1)
	for k, r := range old {
		var stop func()
		stop = func() {
			switch {
			case r.crashed || r.gone || r.leaving:
			case r.leave(w):
				w.logf("%s (count %d) stops for the update", r.id, r.n)
				g.startReplica(w)
			default: // paused: SIGTERM is handled once it runs again
				w.after(w.opts.RetryPeriod, stop)
			}
		}
		w.after(time.Duration(k+1)*step, stop)
	}
}
