package election

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

func TestValidateTimings(t *testing.T) {
	s := time.Second
	cases := []struct {
		name                string
		lease, renew, retry time.Duration
		field, mention      string
	}{
		{"defaults", 15 * s, 10 * s, 2 * s, "", ""},
		{"short profile", 3 * s, 2 * s, s / 2, "", ""},
		{"zero retry", 15 * s, 10 * s, 0, "RetryPeriod", "greater than 0"},
		{"negative retry", 15 * s, 10 * s, -s, "RetryPeriod", "greater than 0"},
		{"renew equal to 1.2 x retry", 15 * s, 12 * s, 10 * s, "RenewDeadline", "1.2 x retry period"},
		{"renew below retry", 15 * s, s, 2 * s, "RenewDeadline", "1.2 x retry period"},
		{"lease equal to renew", 10 * s, 10 * s, 2 * s, "LeaseDuration", "greater than the renew deadline"},
		{"lease below renew", 5 * s, 10 * s, 2 * s, "LeaseDuration", "greater than the renew deadline"},
		{"fractional lease", 1500 * time.Millisecond, s, 500 * time.Millisecond, "LeaseDuration", "whole number of seconds"},
		{"lease beyond int32 seconds", (1 << 31) * s, 10 * s, 2 * s, "LeaseDuration", "at most"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateTimings(c.lease, c.renew, c.retry)
			if c.field == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(ce.Problem, c.mention) {
				t.Fatalf("got %v, want a ConfigError on %s mentioning %q", err, c.field, c.mention)
			}
		})
	}
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	b := memory.NewStore().Open("x")
	cases := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"no backend", Config{Identity: "a"}, "Backend"},
		{"no identity", Config{Backend: b}, "Identity"},
		{"negative hold-off", Config{Backend: b, Identity: "a", ReleaseHoldOff: -time.Second}, "ReleaseHoldOff"},
		{"bad timings", Config{Backend: b, Identity: "a", RenewDeadline: time.Minute}, "LeaseDuration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.cfg)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != c.field {
				t.Fatalf("got %v, want a ConfigError on %s", err, c.field)
			}
		})
	}
}

func TestNewAppliesDefaults(t *testing.T) {
	e, err := New(Config{Backend: memory.NewStore().Open("x"), Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	c := e.cfg
	if c.LeaseDuration != DefaultLeaseDuration || c.RenewDeadline != DefaultRenewDeadline ||
		c.RetryPeriod != DefaultRetryPeriod || c.ReleaseHoldOff != DefaultLeaseDuration {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

func TestNewIdentityIsUniquePerCall(t *testing.T) {
	a, b := NewIdentity("pod-0"), NewIdentity("pod-0")
	if a == b || !strings.HasPrefix(a, "pod-0_") {
		t.Fatalf("identities %q and %q: want distinct, prefixed by pod-0_", a, b)
	}
}
