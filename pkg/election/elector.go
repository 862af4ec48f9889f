package election

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Elector is one candidate in one election. Create it with New, start it
// with Run, read it with Status from any goroutine.
type Elector struct {
	cfg Config
	log *slog.Logger

	// opMu serialises store operations: the loop's attempts and Release.
	opMu sync.Mutex

	mu sync.Mutex // guards everything below
	// view is what this candidate last learnt about the record.
	view view
	// pollFast is set while changes are learnt from reads rather than
	// snapshots (see absorbSnapshot): a standby then polls every
	// RetryPeriod instead of waiting for the record to expire.
	pollFast bool
	// highestToken is the highest token seen in any record.
	highestToken int64
	// leading is true from a successful acquire until this candidate learns
	// it lost, gives up or is stopped. Claims are further bounded by
	// renewedAt+RenewDeadline in Status.
	leading   bool
	renewedAt time.Time
	token     int64
	// termStarted is when this candidate's current or last term began.
	termStarted time.Time
	// holdOffUntil keeps the candidate out of the election after Release.
	holdOffUntil time.Time
	// sittingOut keeps it out between SitOut and Rejoin; wake then asks
	// Run for an attempt at once.
	sittingOut bool
	wake       chan struct{}
	// stopped is set when Run's context ends: no claim after that.
	stopped bool
	// lost is set when the backend reports its store lost; lostCh is
	// closed then.
	lost   bool
	lostCh chan struct{}
	// reachedStore is set by the first successful store operation.
	reachedStore bool
	// busySince is when the loop started the attempt or snapshot it is
	// handling now; zero while it waits.
	busySince time.Time
	// failures counts the store requests that failed in a row.
	failures failureLog
	// deferredVersion is the version of a record this candidate recreated
	// without claiming it (decide's deferClaim).
	deferredVersion backend.Version
	// deferredGap is where the gap of a term begun on that record counts
	// from: the first sight of the absence it replaced (TermStart.Gap),
	// if a record had been seen before it.
	deferredGap gapStart
	// writtenVersion is the version of this candidate's last write that it
	// knows succeeded: answered, or a renewal whose answer was lost, read
	// back (unanswered).
	writtenVersion backend.Version
	// unanswered holds the records of this candidate's renewals whose
	// outcome is unknown (cancelled, timed out, a transport error), sent
	// since it last saw the record change, the last unansweredKept of
	// them: each may have landed. All are compare-and-swaps on the version
	// it saw last, so at most one did; the next change it sees settles
	// them (see observeLocked).
	unanswered []backend.Record
	// attemptFailed is set when the last attempt's request failed;
	// attemptStarted is when the last attempt began.
	attemptFailed  bool
	attemptStarted time.Time
	// attemptCutOff is set when the last attempt failed because its
	// bound (attemptTimeout) cut it off.
	attemptCutOff bool
	// lastWriteTook is how long this candidate's last successful write
	// took, from the request to its answer (attemptTimeout).
	lastWriteTook time.Duration
	// checkDue is set by a change signal on a leader: the next attempt
	// reads the record before its renewal is due (checkAfterSignal).
	checkDue bool
	// acquireOn is the version the next attempt of this standby decides
	// on without a read, if the snapshot still shows it then
	// (readForAttempt): a snapshot on which the rules let it acquire at
	// once (absorbSnapshot), or the version it waits on to expire while
	// its watch keeps up (nextWait). Empty otherwise; every attempt
	// clears it.
	acquireOn backend.Version
	// readAgainNow is set when a leader's write lost a race: the next
	// attempt starts at once; readAgainUsed keeps that to one in a row.
	readAgainNow, readAgainUsed bool
	// accepted is the last hand-off offer this candidate accepted
	// (rules.go); cleared when a term starts.
	accepted acceptedOffer
	// regressedReported is the last record whose token was reported
	// lower than one seen before (TokenRegressed), nil if none: one
	// report each.
	regressedReported *heldTerm
	// boundedReported is the last record reported for a lease duration
	// longer than MaxRecordLeaseDuration, nil if none: one report each.
	boundedReported *heldTerm
	// exhaustedSince is the view.since of the record for which a token
	// shortage was last reported: one report per version.
	exhaustedSince time.Time
	// changed is closed and replaced whenever Status may have changed.
	changed chan struct{}
	// events are Observer calls made under mu, delivered by
	// unlockAndNotify.
	events []func(Observer)

	// deliverMu keeps Observer calls in the order they were made.
	deliverMu sync.Mutex
}

// gapStart is where the gap before a term counts from (TermStart.Gap).
type gapStart struct {
	since time.Time
	known bool
}

// gapStartLocked is where the gap before a term begun now, over the record
// version v, counts from: the first sight of v, or for a record this
// candidate recreated without claiming it, of the absence it replaced.
func (e *Elector) gapStartLocked(v view) gapStart {
	if v.present && v.version == e.deferredVersion {
		return e.deferredGap
	}
	return gapStart{since: v.since, known: v.sawRecord}
}

// heldTerm names a term by its holder and token.
type heldTerm struct {
	holder string
	token  int64
}

// Status is a candidate's view of the election at one instant.
type Status struct {
	// Leader is true while this candidate holds the record and is within
	// its renew deadline.
	Leader bool
	// Identity is this candidate's identity.
	Identity string
	// Holder is the holder named by the record as last seen ("" if released,
	// missing or never seen).
	Holder string
	// Token is the fencing token of this candidate's term; 0 unless Leader.
	Token int64
	// ValidUntil is when this candidate stops claiming leadership unless it
	// renews first; zero unless Leader.
	ValidUntil time.Time
	// ReachedStore is true once any store operation has succeeded.
	ReachedStore bool
	// TermStarted is when this candidate's current or last term began
	// (see TermStart.Started); zero before its first. It is kept after
	// the term ends.
	TermStarted time.Time
	// LastRenewal is when the last successful write of this candidate's
	// claim began (an acquisition or a renewal; its claim counts from
	// then); zero before its first. It is kept after the term ends.
	LastRenewal time.Time
}

// New checks cfg, applies defaults, and returns an Elector that is not yet
// running.
func New(cfg Config) (*Elector, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("identity", cfg.Identity, "lease", cfg.Backend.Describe())
	cfg.Backend = withRequestLog(cfg.Backend, log)
	return &Elector{
		cfg:      cfg,
		log:      log,
		pollFast: true,
		lostCh:   make(chan struct{}),
		wake:     make(chan struct{}, 1),
		changed:  make(chan struct{}),
	}, nil
}

// Status reports the state at this instant. Whether this candidate leads is
// computed now, from the time of its last successful renewal; Status never
// touches the store.
func (e *Elector) Status() Status {
	// The time is read under the lock: a reader that waited for it while
	// the process was paused judges the claim at when it gets it.
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.cfg.Clock.Now()
	s := Status{
		Identity:     e.cfg.Identity,
		Holder:       e.view.holder(),
		ReachedStore: e.reachedStore,
		TermStarted:  e.termStarted,
		LastRenewal:  e.renewedAt,
	}
	if e.claimingLocked(now) {
		s.Leader = true
		s.Token = e.token
		s.ValidUntil = e.renewedAt.Add(e.cfg.RenewDeadline)
	}
	return s
}

// HolderExpired reports whether the record this candidate last saw names a
// holder whose claim has ended by the expiry rule: this candidate has seen
// that version unchanged for the record's lease duration (never less than
// its own), on its own clock. A candidate that takes part in the election
// may then take the record over; a shard group treats such a shard as
// free to acquire (package shard). It is false while the record names no
// holder, is missing, or has not been seen, and while this candidate
// claims it. Like Status, it never touches the store.
func (e *Elector) HolderExpired() bool {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	o := e.observationLocked(now)
	return o.view.known && o.view.present && o.view.rec.HolderIdentity != "" && !o.claiming && !now.Before(o.expiry())
}

// claimingLocked applies the self-demotion rule: both the monotonic and the
// wall-clock time since the last renewal must be below RenewDeadline.
func (e *Elector) claimingLocked(now time.Time) bool {
	if !e.leading || e.stopped || e.lost {
		return false
	}
	monotonic := now.Sub(e.renewedAt)
	wall := now.Round(0).Sub(e.renewedAt.Round(0))
	return monotonic < e.cfg.RenewDeadline && wall < e.cfg.RenewDeadline && wall >= 0
}

// Changed returns a channel that is closed the next time the state may have
// changed (leadership, holder, token, renewal). Call it again after it
// fires. Time passing alone does not close it: a reader that must notice
// self-demotion also waits until Status().ValidUntil.
func (e *Elector) Changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

func (e *Elector) notifyLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// Healthy reports whether the loop is not wedged: no attempt or snapshot
// has been in hand for longer than RenewDeadline (the longest an attempt
// may take) plus twice the longest wait. A candidate that waits, however
// long, is healthy.
func (e *Elector) Healthy() bool {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	limit := e.cfg.RenewDeadline + 2*time.Duration(JitterFactor*float64(e.cfg.RetryPeriod))
	return e.busySince.IsZero() || now.Sub(e.busySince) < limit
}

// busy marks the loop as handling an attempt or a snapshot from now on;
// the returned function marks it idle again.
func (e *Elector) busy() (idle func()) {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	e.busySince = now
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		e.busySince = time.Time{}
		e.mu.Unlock()
	}
}

// snapshot returns the backend's snapshot, if it keeps one (ok false
// otherwise). The token it shows counts among those seen whatever the
// caller then does with it, even leave it for a read: no term of this
// candidate's starts at or below a token it was shown.
func (e *Elector) snapshot() (backend.Record, backend.Version, bool) {
	snap, ok := e.cfg.Backend.(backend.Snapshotter)
	if !ok {
		return backend.Record{}, "", false
	}
	rec, version, ok := snap.Snapshot()
	if ok {
		e.mu.Lock()
		e.highestToken = max(e.highestToken, rec.Transitions)
		e.mu.Unlock()
	}
	return rec, version, ok
}

// observe records an answer that has just arrived.
func (e *Elector) observe(present bool, rec backend.Record, version backend.Version) {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	defer e.unlockAndNotify()
	e.observeLocked(present, rec, version, now)
}

// observeLocked records an answer that arrived at. A new version (or a
// new absence) restarts the expiry wait; the same version again changes
// nothing. It reports whether anything changed.
//
// Every new version is checked here, however it was learnt (a read, a
// snapshot, a write of this candidate's): a token lower than one seen
// before, a lease duration beyond the bound, each reported once.
//
// The first new version or absence observed after renewals whose outcome
// is unknown settles them: a record equal to one that a renewal sent is
// its write, landed, and its version is adopted as written by this
// candidate (the package doc says why that is safe); anything else means
// none landed, or it was written over, and they are forgotten.
func (e *Elector) observeLocked(present bool, rec backend.Record, version backend.Version, at time.Time) bool {
	v := &e.view
	if v.known && v.present == present && (!present || v.version == version) {
		return false
	}
	sent := e.unanswered
	e.unanswered = nil
	if present && slices.ContainsFunc(sent, func(sent backend.Record) bool { return sameRecord(rec, sent) }) {
		e.writtenVersion = version
		e.log.Debug("a renewal whose answer was lost had landed", "token", rec.Transitions)
	}
	defer e.logLeaderChangeLocked(*v)
	if present {
		e.reportRegressedTokenLocked(rec)
		e.reportBoundedLeaseLocked(rec)
		*v = view{known: true, present: true, sawRecord: true, rec: rec, version: version, since: at}
		e.highestToken = max(e.highestToken, rec.Transitions)
	} else {
		v.known, v.present, v.version, v.since, v.neverCreated = true, false, "", at, false
	}
	e.notifyLocked()
	return true
}

// reportRegressedTokenLocked reports rec, a new version, if its token is
// lower than one seen before (TokenRegressed): once per holder and lower
// token, not at every renewal of a holder that started below the highest
// token seen.
func (e *Elector) reportRegressedTokenLocked(rec backend.Record) {
	highest := e.highestToken
	term := &heldTerm{holder: rec.HolderIdentity, token: rec.Transitions}
	if rec.Transitions >= highest || e.regressedReported != nil && *term == *e.regressedReported {
		return
	}
	e.regressedReported = term
	e.log.Error("the record's token is lower than one seen before: it was recreated or edited; "+
		"new terms continue above the highest token seen", "token", rec.Transitions, "highest", highest)
	e.tellLocked(func(o Observer) { o.TokenAnomaly(TokenRegressed, rec.Transitions, highest) })
}

// reportBoundedLeaseLocked reports rec, a new version, if it declares a
// lease duration longer than this candidate trusts: once per holder and
// token, not at every renewal of a holder that writes it.
func (e *Elector) reportBoundedLeaseLocked(rec backend.Record) {
	declared, bound := time.Duration(rec.LeaseDurationSeconds)*time.Second, e.cfg.MaxRecordLeaseDuration
	term := &heldTerm{holder: rec.HolderIdentity, token: rec.Transitions}
	if declared <= bound || e.boundedReported != nil && *term == *e.boundedReported {
		return
	}
	e.boundedReported = term
	e.log.Warn("the record declares a lease duration longer than this candidate trusts: it is waited out as if it declared the bound",
		"holder", rec.HolderIdentity, "token", rec.Transitions, "leaseDuration", declared, "bound", bound)
	e.tellLocked(func(o Observer) {
		if o, ok := o.(LeaseBoundObserver); ok {
			o.LeaseDurationBounded(rec.HolderIdentity, declared, bound)
		}
	})
}

// logLeaderChangeLocked logs, in one Info line, who leads now that the
// record has changed from before to e.view, when that changed: another
// holder, a new term (token) of a holder, or no holder at all (released,
// or the record missing). Renewals change neither, so a standby logs
// nothing while the same leader renews. This candidate's own terms are
// logged as "became leader" instead, and its own release as "released the
// lease".
func (e *Elector) logLeaderChangeLocked(before view) {
	now := e.view
	holder := now.holder()
	if holder == e.cfg.Identity || (holder == "" && now.present && before.holder() == e.cfg.Identity) {
		return
	}
	if before.holder() == holder && before.present == now.present &&
		(holder == "" || before.rec.Transitions == now.rec.Transitions) {
		return
	}
	switch {
	case !now.present:
		e.log.Info("leader changed: the record is missing", "holder", "")
	case holder == "":
		e.log.Info("leader changed: released, nobody leads", "holder", "", "token", now.rec.Transitions)
	default:
		e.log.Info("leader changed", "holder", holder, "token", now.rec.Transitions)
	}
}

// observationLocked is what decide needs, at now.
func (e *Elector) observationLocked(now time.Time) observation {
	return observation{
		identity:       e.cfg.Identity,
		view:           e.view,
		highest:        e.highestToken,
		leading:        e.leading,
		claiming:       e.claimingLocked(now),
		token:          e.token,
		holdOffUntil:   e.holdOffUntil,
		sittingOut:     e.sittingOut,
		stopped:        e.stopped || e.lost,
		ownLease:       e.cfg.LeaseDuration,
		maxRecordLease: e.cfg.MaxRecordLeaseDuration,
		deferred:       e.deferredVersion,
		written:        e.writtenVersion,
		accepted:       e.accepted,
		revision:       e.cfg.Revision,
		// The leader's HandoffTimeout, if its timings are this
		// candidate's: a quarter leaves room for the accept to land.
		sameRevisionWait: e.SameRevisionWait(),
	}
}

// tellLocked queues an Observer call; unlockAndNotify makes it, after the
// lock is released, so an Observer may call Status.
func (e *Elector) tellLocked(event func(Observer)) { e.events = append(e.events, event) }

// unlockAndNotify releases mu, then makes the Observer calls queued under
// it, in the order they were queued. A critical section that may queue a
// call (tellLocked, directly or through stepDownLocked or loseLocked) ends
// with it, not with mu.Unlock, which would leave the call queued until the
// next unlockAndNotify.
func (e *Elector) unlockAndNotify() {
	e.mu.Unlock()
	e.deliverMu.Lock()
	defer e.deliverMu.Unlock()
	e.mu.Lock()
	events := e.events
	e.events = nil
	e.mu.Unlock()
	for _, event := range events {
		event(e.cfg.Observer)
	}
}
