package election

import (
	"fmt"
	"math"
	"time"
)

// This file is the election's timings: their defaults and the rules they
// must keep, which the package doc explains.

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
		return &ConfigError{"RetryPeriod", fmt.Sprintf("must be greater than 0, got %v", retry)}
	case float64(renew) <= JitterFactor*float64(retry):
		return &ConfigError{"RenewDeadline", fmt.Sprintf("must be greater than %v x retry period (%v), got %v",
			JitterFactor, time.Duration(JitterFactor*float64(retry)), renew)}
	case lease <= renew:
		return &ConfigError{"LeaseDuration", fmt.Sprintf("must be greater than the renew deadline (%v), got %v", renew, lease)}
	case lease%time.Second != 0:
		return &ConfigError{"LeaseDuration", fmt.Sprintf("must be a whole number of seconds (a Lease stores seconds), got %v", lease)}
	case lease/time.Second > math.MaxInt32:
		return &ConfigError{"LeaseDuration", fmt.Sprintf("must be at most %d seconds, got %v", math.MaxInt32, lease)}
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
		return &ConfigError{"RenewInterval", fmt.Sprintf("must be greater than 0, got %v", renewInterval)}
	case renewInterval >= room:
		return &ConfigError{"RenewInterval", fmt.Sprintf(
			"must be less than the renew deadline (%v) minus %v x retry period (%v), %v, so a failed renewal is retried before the leader stops claiming; got %v",
			renewDeadline, JitterFactor, jittered(retryPeriod, 1), room, renewInterval)}
	}
	return nil
}
