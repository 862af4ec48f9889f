package election

import (
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"k8s.io/utils/clock"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Config configures an Elector. Zero durations take their defaults.
type Config struct {
	// Backend stores the election's record. Required.
	Backend backend.Backend
	// Identity names this candidate; it must be unique per process start
	// (see NewIdentity). Required.
	Identity string
	// LeaseDuration is how long a standby waits, after it last saw the
	// record change, before taking it over. Whole seconds, because a Lease
	// stores whole seconds. Default 15s. Must exceed RenewDeadline.
	LeaseDuration time.Duration
	// RenewDeadline is how long after the start of its last successful
	// renewal the leader keeps claiming leadership. Default 10s. Must
	// exceed JitterFactor*RetryPeriod.
	RenewDeadline time.Duration
	// RetryPeriod, plus up to 20% jitter, is the time from the start of a
	// failed attempt (the leader's included) to the next attempt (at once
	// if the failed one took longer), and between a standby's polls when
	// it cannot rely on change signals. Default 2s.
	RetryPeriod time.Duration
	// RenewInterval is how long after the start of its last successful
	// renewal the leader renews again. A failed renewal is retried a
	// jittered RetryPeriod after it started, not a RenewInterval. Default:
	// DefaultRenewInterval (LeaseDuration/3, 5s). Must be greater than 0,
	// and RenewInterval + JitterFactor*RetryPeriod must be less than
	// RenewDeadline. The interval never lengthens a claim (see the package
	// doc); it decides how many failed tries fit before the leader stops
	// claiming.
	RenewInterval time.Duration
	// MaxRecordLeaseDuration bounds the lease duration this candidate
	// trusts a record with: a record that declares a longer one (a client
	// with a bug, a hand edit) is waited out as if it declared this, and
	// reported once per holder and token (LeaseBoundObserver). Default:
	// DefaultMaxRecordLeaseDuration(LeaseDuration), ten times it. Must be
	// at least LeaseDuration. Every candidate of an election must trust
	// the longest LeaseDuration any of them writes: a record waited out
	// for less than it declares may be taken over while its holder still
	// claims.
	MaxRecordLeaseDuration time.Duration
	// ReleaseOnCancel makes Run release the lease when its context ends
	// while it holds the record. Safe only once the application has stopped
	// acting as leader.
	ReleaseOnCancel bool
	// HandoffOnStop, with ReleaseOnCancel, makes a leader whose Run ends
	// first offer leadership to any candidate (Handoff with no target),
	// preferring one of another Revision, and release only if none
	// accepted within HandoffTimeout: a rollout's stopping leader hands
	// over to a Pod of the new revision rather than to whichever standby
	// answers a release first (see the package doc, "Planned hand-off").
	// A candidate whose Run ends while its claim on a record it created
	// is pending (see the package doc, "A missing record") releases that
	// record once the claim could begin, up to a lease later, rather than
	// leave it to be waited out for a further lease.
	HandoffOnStop bool
	// AwaitReplacement makes a leader whose Run ends release (with
	// ReleaseOnCancel, or by Release once Run has ended) without offering,
	// and leave the release for
	// that long to its own replacement (a candidate whose identity has
	// the same prefix, IdentityPrefix: a StatefulSet's Pod keeps its
	// name) or to a candidate of a revision other than its own; any other
	// candidate takes it once it has stood that long (see the package
	// doc, "Succession in a rollout"). 0: off. At most
	// backend.MaxReserveWait, in whole milliseconds.
	AwaitReplacement time.Duration
	// Revision is this candidate's revision, e.g. its Pod's
	// pod-template-hash (a Deployment) or controller-revision-hash (a
	// StatefulSet); "" if unknown. A leader's offers carry it, and an
	// offer to anyone from a leader of the same revision is accepted only
	// after SameRevisionWait, which lets a candidate of another revision
	// take it first.
	Revision string
	// ReleaseHoldOff is how long Release keeps this candidate out of the
	// election. Default: LeaseDuration.
	ReleaseHoldOff time.Duration
	// Clock tells time, and keeps every bound the elector puts on its own
	// work (an attempt, a check, a hand-off, the release on shutdown): on
	// another clock than the real one, that work ends when the clock says
	// so (with its AfterFunc if it has one, else a timer), as a
	// deterministic simulator needs. Default: the real clock.
	Clock clock.Clock
	// Logger receives the loop's logs. Default: slog.Default().
	Logger *slog.Logger
	// Observer is told about leadership changes and renew failures.
	// Default: none.
	Observer Observer
	// Jitter returns a number in [0, 1) that sets the random part of a
	// wait (see JitterFactor). Default: math/rand/v2's Float64. A
	// simulator replaying a schedule gives a seeded source.
	Jitter func() float64
}

// Observer is told what the loop does, for metrics and events. Its methods
// are called in order, after the elector's lock is released (so they may
// call Status, but not Release), and must not block.
type Observer interface {
	// LeadershipChanged reports that this candidate started (leading=true,
	// with its token) or stopped leading.
	LeadershipChanged(leading bool, token int64)
	// RenewFailed reports a failed attempt to renew while leading.
	RenewFailed(err error)
	// TokenAnomaly reports a fencing-token problem found in the store:
	// seen is the record's token, highest the highest this candidate had
	// seen before.
	TokenAnomaly(anomaly TokenAnomaly, seen, highest int64)
}

// TokenAnomaly names a fencing-token problem found in the store.
type TokenAnomaly string

const (
	// TokenRegressed: a record carries a token lower than one this
	// candidate has seen (the record was recreated, by a client-go
	// candidate at 0 for instance, or edited). This candidate's new terms
	// continue above the highest token it has seen; a candidate that
	// starts later cannot know it.
	TokenRegressed TokenAnomaly = "token-regressed"
	// TokenExhausted: a new term would need a token above
	// backend.MaxTransitions. Nobody can take the record over until an
	// operator resets it.
	TokenExhausted TokenAnomaly = "token-exhausted"
)

// LeaseBoundObserver is an Observer that is also told of a record that
// declares a lease duration longer than this candidate trusts
// (Config.MaxRecordLeaseDuration): holder is the record's holder,
// declared its lease duration, bound the longest one trusted, which the
// candidate waits instead. Once per holder and token, however the record
// was learnt (a read or a snapshot), under the rules of Observer.
type LeaseBoundObserver interface {
	Observer
	LeaseDurationBounded(holder string, declared, bound time.Duration)
}

// TermObserver is an Observer that is also told how each of this
// candidate's terms began and why it ended. When Config.Observer
// implements it, TermStarted follows every LeadershipChanged(true, ...)
// and TermEnded every LeadershipChanged(false, ...), in the same order and
// under the same rules.
type TermObserver interface {
	Observer
	TermStarted(TermStart)
	TermEnded(TermEnd)
}

// TermStart describes a term of this candidate that has just begun.
type TermStart struct {
	// Token is the term's fencing token.
	Token int64
	// Started is when the attempt that won the term began: the claim
	// counts from then, as from every renewal.
	Started time.Time
	// Gap is the time between terms as this candidate saw it: from the
	// moment an answer first showed it the record version it took over
	// (the previous term's last renewal, its release, its hand-off
	// transfer, or the record missing; for a record it recreated and
	// claimed a lease later, the absence it replaced) to the moment its
	// own write succeeded, on its own monotonic clock. It over-states the time
	// nobody led by how long the previous holder kept claiming after that
	// version (up to its renew deadline, when it stopped without
	// releasing), and never under-states it by more than the delay of the
	// change signal or poll that showed the version. HasGap is false, and
	// Gap zero, when this candidate had seen no record before (the first
	// term of an election, or its first after it started on a missing
	// record).
	Gap    time.Duration
	HasGap bool
}

// TermEnd describes a term of this candidate that has just ended.
type TermEnd struct {
	// Token is the term's fencing token.
	Token int64
	// Reason is why it ended.
	Reason TermEndReason
}

// TermEndReason says why a term ended.
type TermEndReason string

const (
	// TermLost: the candidate could not renew within its renew deadline,
	// found another holder (or no record, or an emptied one) in the
	// store, or lost the store itself.
	TermLost TermEndReason = "lost"
	// TermReleased: the candidate released the record, on request
	// (Release), to sit out (SitOut), or on shutdown with ReleaseOnCancel.
	TermReleased TermEndReason = "released"
	// TermHandedOff: the candidate handed leadership to another one
	// (Handoff).
	TermHandedOff TermEndReason = "handed_off"
	// TermStopped: Run ended without ReleaseOnCancel; the record is left
	// to expire.
	TermStopped TermEndReason = "stopped"
)

// TermEndReasons lists every TermEndReason.
var TermEndReasons = []TermEndReason{TermLost, TermReleased, TermHandedOff, TermStopped}

type noObserver struct{}

func (noObserver) LeadershipChanged(bool, int64)           {}
func (noObserver) RenewFailed(error)                       {}
func (noObserver) TokenAnomaly(TokenAnomaly, int64, int64) {}

// ConfigError reports an invalid Config field.
type ConfigError struct {
	// Field is the Config field's name, e.g. "LeaseDuration".
	Field string
	// Problem states the rule that was broken.
	Problem string
	// Other, for a rule between two fields ("LeaseDuration" must be
	// greater than "RenewDeadline"), is the other field, and OtherProblem
	// states the same rule from its side: where only Other was set by
	// hand, it is the one to blame.
	Other, OtherProblem string
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Problem }

func (c Config) withDefaults() Config {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = DefaultRenewDeadline
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = DefaultRetryPeriod
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = DefaultRenewInterval(c.LeaseDuration, c.RenewDeadline, c.RetryPeriod)
	}
	if c.MaxRecordLeaseDuration == 0 {
		c.MaxRecordLeaseDuration = DefaultMaxRecordLeaseDuration(c.LeaseDuration)
	}
	if c.ReleaseHoldOff == 0 {
		c.ReleaseHoldOff = c.LeaseDuration
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Observer == nil {
		c.Observer = noObserver{}
	}
	if c.Jitter == nil {
		c.Jitter = rand.Float64
	}
	return c
}

func (c Config) validate() error {
	if c.Backend == nil {
		return &ConfigError{Field: "Backend", Problem: "is required"}
	}
	if c.Identity == "" {
		return &ConfigError{Field: "Identity", Problem: "must not be empty"}
	}
	if c.ReleaseHoldOff < 0 {
		return &ConfigError{Field: "ReleaseHoldOff", Problem: fmt.Sprintf("must not be negative, got %v", c.ReleaseHoldOff)}
	}
	if err := ValidateAwaitReplacement(c.AwaitReplacement); err != nil {
		return err
	}
	if err := ValidateTimings(c.LeaseDuration, c.RenewDeadline, c.RetryPeriod); err != nil {
		return err
	}
	if err := ValidateMaxRecordLeaseDuration(c.MaxRecordLeaseDuration, c.LeaseDuration); err != nil {
		return err
	}
	return ValidateRenewInterval(c.RenewInterval, c.RenewDeadline, c.RetryPeriod)
}

// Observers returns an Observer that tells each of obs in turn.
func Observers(obs ...Observer) Observer { return observers(obs) }

type observers []Observer

func (o observers) LeadershipChanged(leading bool, token int64) {
	for _, x := range o {
		x.LeadershipChanged(leading, token)
	}
}

func (o observers) RenewFailed(err error) {
	for _, x := range o {
		x.RenewFailed(err)
	}
}

func (o observers) TermStarted(t TermStart) {
	for _, x := range o {
		if x, ok := x.(TermObserver); ok {
			x.TermStarted(t)
		}
	}
}

func (o observers) TermEnded(t TermEnd) {
	for _, x := range o {
		if x, ok := x.(TermObserver); ok {
			x.TermEnded(t)
		}
	}
}

func (o observers) LeaseDurationBounded(holder string, declared, bound time.Duration) {
	for _, x := range o {
		if x, ok := x.(LeaseBoundObserver); ok {
			x.LeaseDurationBounded(holder, declared, bound)
		}
	}
}

func (o observers) TokenAnomaly(a TokenAnomaly, seen, highest int64) {
	for _, x := range o {
		x.TokenAnomaly(a, seen, highest)
	}
}

// The election's timings: their defaults and the rules they must keep,
// which the package doc explains.

// Default timings, the same as client-go's and kube-controller-manager's.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// JitterFactor bounds the random extra wait between attempts after a
// failure and between a standby's polls: up to JitterFactor-1 (20%) of
// RetryPeriod. RenewDeadline must exceed JitterFactor*RetryPeriod, and
// RenewInterval+JitterFactor*RetryPeriod too, so that a failed renewal is
// retried before the leader stops claiming.
const JitterFactor = 1.2

// DefaultRenewInterval is the RenewInterval used when Config leaves it
// zero: a third of the lease duration, as in the reference tutorial (5s
// at the default timings, so 12 renewals a minute). When that would leave
// no room for a retry before the renew deadline (see ValidateRenewInterval),
// it is half the room there is instead: (renewDeadline -
// JitterFactor*retryPeriod) / 2, which passes ValidateRenewInterval for
// any timings ValidateTimings accepts that leave that room at 2ns or more.
func DefaultRenewInterval(leaseDuration, renewDeadline, retryPeriod time.Duration) time.Duration {
	room := renewDeadline - jittered(retryPeriod, 1)
	if third := leaseDuration / 3; third < room {
		return third
	}
	return room / 2
}

// jittered is retryPeriod stretched by jitter in [0, 1] up to
// JitterFactor*retryPeriod.
func jittered(retryPeriod time.Duration, jitter float64) time.Duration {
	return time.Duration(float64(retryPeriod) * (1 + (JitterFactor-1)*jitter))
}

// ValidateTimings checks lease > renew > JitterFactor*retry > 0 and that
// the lease is a whole number of seconds. Errors are *ConfigError.
func ValidateTimings(lease, renew, retry time.Duration) error {
	switch {
	case retry <= 0:
		return &ConfigError{Field: "RetryPeriod", Problem: fmt.Sprintf("must be greater than 0, got %v", retry)}
	case float64(renew) <= JitterFactor*float64(retry):
		return &ConfigError{Field: "RenewDeadline", Problem: fmt.Sprintf("must be greater than %v x retry period (%v), got %v",
			JitterFactor, time.Duration(JitterFactor*float64(retry)), renew),
			Other: "RetryPeriod", OtherProblem: fmt.Sprintf("must be less than the renew deadline (%v) / %v, %v, got %v",
				renew, JitterFactor, time.Duration(float64(renew)/JitterFactor), retry)}
	case lease <= renew:
		return &ConfigError{Field: "LeaseDuration", Problem: fmt.Sprintf("must be greater than the renew deadline (%v), got %v", renew, lease),
			Other: "RenewDeadline", OtherProblem: fmt.Sprintf("must be less than the lease duration (%v), got %v", lease, renew)}
	case lease%time.Second != 0:
		return &ConfigError{Field: "LeaseDuration", Problem: fmt.Sprintf("must be a whole number of seconds (a Lease stores seconds), got %v", lease)}
	case lease/time.Second > math.MaxInt32:
		return &ConfigError{Field: "LeaseDuration", Problem: fmt.Sprintf("must be at most %d seconds, got %v", math.MaxInt32, lease)}
	}
	return nil
}

// DefaultMaxRecordLeaseMultiple is how many times its own lease duration
// a candidate trusts a record's by default (Config.MaxRecordLeaseDuration).
const DefaultMaxRecordLeaseMultiple = 10

// maxLeaseSeconds is the longest lease duration a record can declare: a
// Lease stores it as an int32 of seconds.
const maxLeaseSeconds = math.MaxInt32 * time.Second

// DefaultMaxRecordLeaseDuration is the MaxRecordLeaseDuration used when
// Config leaves it zero: DefaultMaxRecordLeaseMultiple times leaseDuration,
// at most the longest lease duration a record can declare.
func DefaultMaxRecordLeaseDuration(leaseDuration time.Duration) time.Duration {
	if leaseDuration > maxLeaseSeconds/DefaultMaxRecordLeaseMultiple {
		return maxLeaseSeconds
	}
	return DefaultMaxRecordLeaseMultiple * leaseDuration
}

// ValidateMaxRecordLeaseDuration checks that maxRecordLease, the longest
// lease duration a record is trusted with, is at least lease, the
// candidate's own: a candidate must trust the records it writes itself.
// Errors are *ConfigError on MaxRecordLeaseDuration.
func ValidateMaxRecordLeaseDuration(maxRecordLease, lease time.Duration) error {
	if maxRecordLease < lease {
		return &ConfigError{Field: "MaxRecordLeaseDuration", Problem: fmt.Sprintf(
			"must be at least the lease duration (%v), got %v", lease, maxRecordLease)}
	}
	return nil
}

// ValidateRenewInterval checks renewInterval against timings that
// ValidateTimings accepted: it must be greater than 0, and renewInterval +
// JitterFactor*retryPeriod must be less than renewDeadline, so that after
// a renewal that fails at once, its retry starts, even after the longest
// jittered wait, while the leader still claims. Errors are *ConfigError
// on RenewInterval.
func ValidateRenewInterval(renewInterval, renewDeadline, retryPeriod time.Duration) error {
	room := renewDeadline - jittered(retryPeriod, 1)
	switch {
	case renewInterval <= 0:
		return &ConfigError{Field: "RenewInterval", Problem: fmt.Sprintf("must be greater than 0, got %v", renewInterval)}
	case renewInterval >= room:
		return &ConfigError{Field: "RenewInterval", Problem: fmt.Sprintf(
			"must be less than the renew deadline (%v) minus %v x retry period (%v), %v, so a failed renewal is retried before the leader stops claiming; got %v",
			renewDeadline, JitterFactor, jittered(retryPeriod, 1), room, renewInterval)}
	}
	return nil
}

// ValidateAwaitReplacement checks Config.AwaitReplacement: 0 (off), or a
// positive whole number of milliseconds up to backend.MaxReserveWait.
func ValidateAwaitReplacement(d time.Duration) error {
	if d < 0 || d > backend.MaxReserveWait || d%time.Millisecond != 0 {
		return &ConfigError{Field: "AwaitReplacement", Problem: fmt.Sprintf("must be 0 or whole milliseconds up to %v, got %v", backend.MaxReserveWait, d)}
	}
	return nil
}
