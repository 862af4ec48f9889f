// Package sim runs the election's real code (package election, driven
// through election.Driver) under a deterministic simulator: several
// candidates, one in-memory store with linearizable compare-and-swap, and
// virtual time, with a schedule of faults drawn from a seed: store latency
// (up to beyond the renew deadline) and failures per request, store
// outages, the leader's renew interval (anywhere in its valid range), process pauses of any length, crashes and restarts with a new
// identity, graceful stops and releases, planned hand-offs (to a live
// candidate, a crashed one, a name nobody has, or anyone, amid all the
// other faults), rolling updates from one revision to another whose
// stopping leaders hand off on stop (election.Config.HandoffOnStop), a
// candidate of the other revision first, some of them crashed while they
// stop (rollout.go), the record deleted or edited by
// hand (holder emptied or changed, token raised or lowered, lease duration
// changed), a hostile lease duration written into the record (beyond the
// bound the candidates trust, up to 68 years), change signals delayed,
// dropped and reordered, and clocks that run at different rates; with
// Options.StoreRestarts and Options.Failovers, the store restarts (losing
// nothing: the requests on their way fail, committed or not) and fails
// over to the record as it was some writes ago (storefaults.go); with
// Options.StaleReads and Options.Throttling, reads and change signals
// that show the record as it was a lag ago, and windows in which the
// server refuses requests with 429 (servingfaults.go). The
// bounds the elector puts on its own work (an attempt, a hand-off, the
// release on shutdown) are kept on each candidate's clock in virtual
// time: one that expires cuts off the request or wait it bounds, as a
// real client's context does (driftingClock.AfterFunc).
//
// After every event it checks the invariants: at most one candidate claims
// leadership; a token is claimed by one holder only, and each new term's
// token is above every earlier one (between faults that may rightly reset
// tokens: see docs/backends.md); these bend only for the terms a lossy
// failover affected (storefaults.go); each process's own tokens only
// rise; a guard fed every leader's writes, some of them late, never
// accepts a write from a term older than one it accepted, nor a lower
// token or the same token from another holder than the last it accepted,
// and never refuses the current leader (but after a reset or a lossy
// failover, until the election passes the tokens it holds);
// on a record nobody deleted or edited by hand, every write keeps the
// token or starts a term one above it; and once faults stop, a leader is
// back within Options.livenessBound.
//
// With Options.Shards it plays a shard group instead: replicas over N
// shards, each shard an election of its own run by the same code, which
// elections a replica takes part in decided by package shard from the
// replica's own view of the members (group.go says what is checked).
// After an event the checker looks again only at the shards the event
// touched, which gives the verdicts of looking at every shard
// (contest.touched says why).
//
// A seed replays exactly: one goroutine runs at a time, and every random
// choice, the elector's jitter included, comes from the seed.
package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

// Options shape the schedules.
type Options struct {
	Seed int64
	// Candidates running at once. Default 3.
	Candidates int
	// Duration of the schedule in virtual time. Default 3 minutes, of
	// which the last Quiet are free of faults. Default Quiet: 100 seconds.
	Duration, Quiet time.Duration
	// Drift bounds each candidate's clock rate to [1-Drift, 1+Drift].
	Drift float64
	// Timings, defaulting to the sidecar's: 15s, 10s, 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// RenewInterval, if not zero, is every candidate's renew interval;
	// zero draws one per schedule (drawRenewInterval).
	RenewInterval time.Duration
	// FaultEvery is the mean time between faults. Default 4 seconds.
	FaultEvery time.Duration
	// NoHandoffs leaves planned hand-offs and rolling updates (whose
	// leaders hand off on stop) out of every schedule, which then
	// replays as its seed did before they existed (see scheduleHandoffs
	// and scheduleRollout: otherwise half the schedules have planned
	// hand-offs and a quarter a rolling update).
	NoHandoffs bool
	// Shards, if not zero, plays a shard group instead of one election:
	// Candidates replicas over Shards shards (see group.go).
	Shards int
	// TrustedRecordLease, if not zero, is every candidate's
	// MaxRecordLeaseDuration instead of recordLeaseBound. The liveness
	// bound still assumes recordLeaseBound: a longer one lets a hostile
	// lease duration keep the election without a leader, and the checker
	// says so.
	TrustedRecordLease time.Duration
	// ShardsTo, if not zero and not Shards, adds to a group's schedule a
	// rolling update of the count to ShardsTo, and at times back (see
	// counts.go).
	ShardsTo int
	// StoreRestarts gives every schedule of a lone election one to three
	// restarts of the store that lose nothing, and Failovers one or two
	// failovers that lose its last writes (storefaults.go). Off, the
	// schedules are those their seeds drew before these faults existed.
	StoreRestarts, Failovers bool
	// ReissueVersions makes the failovers hand out again the versions
	// they lost (an etcd backup restored without --bump-revision);
	// otherwise a failover's store issues versions above every one it
	// issued before (etcd restored with --bump-revision). The election tells
	// records apart by their versions: with versions handed out twice,
	// the checker finds tokens handed out twice beyond the terms a
	// failover lost (storefaults.go).
	ReissueVersions bool
	// StaleReads lets a lone election's reads and change signals show the
	// record as it was a lag ago, and Throttling gives its schedule
	// windows in which the server refuses requests with 429 Too Many
	// Requests (servingfaults.go). Off, the schedules are those their
	// seeds drew before these faults existed.
	StaleReads, Throttling bool
	// StatefulSets makes every rolling update a StatefulSet's (see
	// scheduleRollout): its candidates leave their release on stop to
	// their replacement (election.Config.AwaitReplacement). Off, the
	// schedules play as they did before it existed.
	StatefulSets bool
}

func (o Options) withDefaults() Options {
	if o.Candidates == 0 {
		o.Candidates = 3
	}
	if o.Duration == 0 {
		o.Duration = 3 * time.Minute
		if o.Shards > 0 {
			o.Duration = groupDuration
		}
	}
	if o.Quiet == 0 {
		o.Quiet = 100 * time.Second
		if o.Shards > 0 {
			o.Quiet = groupQuiet
		}
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod =
			election.DefaultLeaseDuration, election.DefaultRenewDeadline, election.DefaultRetryPeriod
	}
	if o.FaultEvery == 0 {
		o.FaultEvery = 4 * time.Second
	}
	return o
}

func (o Options) validate() error {
	switch {
	case o.Candidates < 1:
		return fmt.Errorf("candidates must be at least 1, got %d", o.Candidates)
	case o.Drift < 0 || o.Drift >= 1:
		return fmt.Errorf("drift must be in [0, 1), got %v", o.Drift)
	case o.Shards < 0 || o.Shards > shard.MaxShards:
		return fmt.Errorf("shards must be in [0, %d], got %d", shard.MaxShards, o.Shards)
	case o.ShardsTo < 0 || o.ShardsTo > shard.MaxShards || o.ShardsTo > 0 && o.Shards == 0:
		return fmt.Errorf("shards-to must be in [0, %d], and only with shards, got %d", shard.MaxShards, o.ShardsTo)
	case o.ReissueVersions && !o.Failovers:
		return fmt.Errorf("reissuing versions is a kind of failover: only with failovers")
	case (o.StoreRestarts || o.Failovers) && o.Shards > 0:
		return fmt.Errorf("store restarts and failovers are played in a lone election only, not with shards")
	case (o.StaleReads || o.Throttling || o.StatefulSets) && o.Shards > 0:
		return fmt.Errorf("stale reads, throttling and StatefulSets are played in a lone election only, not with shards")
	case o.Quiet > o.Duration:
		return fmt.Errorf("quiet (%v) must not exceed the duration (%v)", o.Quiet, o.Duration)
	case o.TrustedRecordLease != 0 && o.TrustedRecordLease < o.LeaseDuration:
		return fmt.Errorf("trusted record lease (%v) must not be below the lease duration (%v)", o.TrustedRecordLease, o.LeaseDuration)
	}
	if err := election.ValidateTimings(o.LeaseDuration, o.RenewDeadline, o.RetryPeriod); err != nil {
		return err
	}
	if o.RenewInterval != 0 {
		return election.ValidateRenewInterval(o.RenewInterval, o.RenewDeadline, o.RetryPeriod)
	}
	return nil
}

// slowMax is the longest a slow request takes to reach the store.
func (o Options) slowMax() time.Duration { return o.RenewDeadline * 3 / 2 }

// longestEdit is the longest lease duration a hand edit writes.
const longestEdit = 30 * time.Second

// recordLeaseBound is the longest lease duration the candidates trust a
// record with (election.Config.MaxRecordLeaseDuration): the longest a hand
// edit writes, twice the default lease, so that every edit is honoured
// and every hostile lease duration (scheduleHostileLeases) is bounded
// within the schedule's quiet tail. Never less than the candidates' own.
func (o Options) recordLeaseBound() time.Duration { return max(o.LeaseDuration, longestEdit) }

// trustedRecordLease is the candidates' MaxRecordLeaseDuration.
func (o Options) trustedRecordLease() time.Duration {
	if o.TrustedRecordLease != 0 {
		return o.TrustedRecordLease
	}
	return o.recordLeaseBound()
}

// livenessBound is how soon after faults stop a leader must be back: a
// request still in flight may land up to slowMax later. A standby whose
// watch dropped the last change learns of it only when the record it saw
// last expires (one record lease, at most recordLeaseBound however long a
// lease the record declares); if the record is missing, it then waits
// out that absence (another) and claims the record it recreates after its
// own lease duration; each on a clock that may run slow by Drift, with
// three retry periods and a second of store latency as margin.
//
// The renew interval adds nothing to it: a candidate waits a renew
// interval only after a renewal that left it claiming, and the wait ends
// before that claim does (RenewInterval < RenewDeadline, on the same
// clock), so it never falls within a stretch without a leader. The
// schedules draw renew intervals from the whole valid range, up to the
// largest, to check that.
func (o Options) livenessBound() time.Duration {
	longest := o.recordLeaseBound()
	wait := 2*longest + o.LeaseDuration + 3*o.RetryPeriod
	return o.slowMax() + time.Duration(float64(wait)/(1-o.Drift)) + time.Second
}

// drawRenewInterval picks a schedule's renew interval, from a random
// stream of its own so that the rest of the schedule drawn from a seed
// does not depend on it: the default (a third of the lease), one near the
// largest that ValidateRenewInterval accepts (the fewest tries before
// demotion), or any valid one from a twentieth of that up.
func drawRenewInterval(o Options) time.Duration {
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x7e4e))
	room := o.RenewDeadline - time.Duration(election.JitterFactor*float64(o.RetryPeriod))
	between := func(lo, hi time.Duration) time.Duration { // in [lo, hi)
		if hi-lo <= 1 {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	switch rng.IntN(3) {
	case 0:
		return election.DefaultRenewInterval(o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
	case 1:
		return between(room*9/10, room)
	default:
		return between(max(room/20, 1), room)
	}
}

// Result is what one schedule found.
type Result struct {
	Seed int64
	// RenewInterval is the candidates' renew interval in this schedule.
	RenewInterval time.Duration
	Violations    []Violation
	// Trace is the schedule's last events up to its first violation.
	Trace []string
	// Virtual is the virtual time covered; Events and Terms count what
	// happened in it.
	Virtual       time.Duration
	Events, Terms int
	// HostileLeases counts the hostile lease durations written into the
	// record (scheduleHostileLeases).
	HostileLeases int
	// Handoffs counts the planned hand-offs asked for, HandedOff those
	// that returned with the record transferred, and StoppedTargets the
	// accepting candidates paused or crashed right after their accept.
	Handoffs, HandedOff, StoppedTargets int
	// In a shard group: Moves counts the shards released to move, and
	// SettledAfter is how long after faults stopped every shard was last
	// not held by the member the table gives it.
	Moves        int
	SettledAfter time.Duration
	// CountChanges counts the rolling updates of the shard count played
	// (Options.ShardsTo).
	CountChanges int
	// Rollout says the schedule had a rolling update from one revision
	// to another, its candidates handing off on stop (rollout.go):
	// LeadersStopped counts the leaders stopped gracefully, StopHandedOff
	// the hand-offs on stop whose transfer reached the store,
	// StopToOtherRevision those of them to a candidate of the other
	// revision, and CrashedStopping the candidates crashed while they
	// stopped, and StopReleasedPending the records a candidate stopped
	// before its claim on them began released once it could have begun.
	Rollout                                                                                  bool
	LeadersStopped, StopHandedOff, StopToOtherRevision, CrashedStopping, StopReleasedPending int
	// StatefulSet says the rolling update was a StatefulSet's, whose
	// candidates leave their release on stop to their replacement;
	// ReservedTaken counts such releases taken by the replacement, by a
	// candidate of another revision and by anyone after the wait.
	StatefulSet   bool
	ReservedTaken [3]int
	// StoreRestarts and Failovers count the store's restarts and lossy
	// failovers played (Options.StoreRestarts, Options.Failovers),
	// LostWrites the writes the failovers lost, and TokensHandedTwice the
	// tokens claimed by a second holder after a failover lost the term of
	// the first.
	StoreRestarts, Failovers, LostWrites, TokensHandedTwice int
	// Severed counts the requests on their way to the store when it went
	// down, CommittedAtCrash those of them that took effect all the same.
	Severed, CommittedAtCrash int
	// StaleReads counts the reads and change signals that showed a state
	// older than the store's (Options.StaleReads); Throttled the tries
	// refused with 429 and ThrottledOut the requests refused until their
	// timeout (Options.Throttling); TokenRegressedReports the candidates'
	// reports of a token below one they saw (election.TokenRegressed),
	// true after a hand edit or a deletion, false after a stale read.
	StaleReads, Throttled, ThrottledOut, TokenRegressedReports int
}

// Run plays the schedule of opts.Seed.
func Run(opts Options) (Result, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return Result{}, err
	}
	w := &world{
		opts:      opts,
		rng:       rand.New(rand.NewPCG(uint64(opts.Seed), 0x5eed)),
		quietFrom: opts.Duration - opts.Quiet,
	}
	w.trace.limit = 400
	w.renewInterval = opts.RenewInterval
	if w.renewInterval == 0 {
		w.renewInterval = drawRenewInterval(opts)
	}
	w.snapshots = w.chance(0.5)
	w.profile = drawProfile(w)
	if opts.Shards > 0 {
		return runGroup(w)
	}
	w.elections = []*contest{{shard: -1}}
	// Odd seeds' stores prove a record never created: drawn from the
	// seed, not the random stream, so earlier seeds replay as before.
	// A store whose reads lag is a Lease's, which proves nothing.
	w.elections[0].store.provesNeverCreated = opts.Seed%2 != 0 && !opts.StaleReads
	w.logf("schedule %d: %d candidates, renew interval %v, snapshots %v, store %+v, proves a record never created %v",
		opts.Seed, opts.Candidates, w.renewInterval, w.snapshots, w.profile, w.elections[0].store.provesNeverCreated)
	for range opts.Candidates {
		w.at(w.between(0, 5*time.Second), func() { w.startCandidate() })
	}
	scheduleFaults(w)
	scheduleHandoffs(w)
	scheduleHostileLeases(w)
	scheduleRollout(w)
	scheduleStoreFaults(w)
	scheduleServingFaults(w)
	w.run()
	return w.result(), nil
}

// result is what the schedule found, once run.
func (w *world) result() Result {
	terms := 0
	for _, el := range w.elections {
		terms += el.check.terms
	}
	r := Result{
		Seed:          w.opts.Seed,
		RenewInterval: w.renewInterval,
		Violations:    w.violations,
		Trace:         w.trace.lines(),
		Virtual:       w.now,
		Events:        w.eventCount,
		Terms:         terms,

		HostileLeases:  w.hostileLeases,
		Handoffs:       w.handoffCount.asked,
		HandedOff:      w.handoffCount.done,
		StoppedTargets: w.handoffCount.stopped,
	}
	if sf := w.storeFaults; sf != nil {
		r.StoreRestarts, r.Failovers, r.LostWrites, r.TokensHandedTwice = sf.restarts, sf.failovers, sf.lostWrites, sf.handedTwice
		r.Severed, r.CommittedAtCrash = sf.severed, sf.committedAtCrash
	}
	if sf := w.servingFaults; sf != nil {
		r.StaleReads, r.Throttled, r.ThrottledOut = sf.staleReads, sf.throttled, sf.throttledOut
	}
	r.TokenRegressedReports = w.regressedReports
	if ro := w.rollout; ro != nil {
		r.Rollout = true
		r.LeadersStopped, r.StopHandedOff, r.StopToOtherRevision, r.CrashedStopping, r.StopReleasedPending =
			ro.leadersStopped, ro.handedOff, ro.toOther, ro.crashedStopping, ro.pendingReleased
		r.StatefulSet, r.ReservedTaken = ro.statefulSet, ro.reservedTaken
	}
	return r
}
