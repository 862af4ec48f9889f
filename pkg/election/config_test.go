package election

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

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
		{"negative renew interval", Config{Backend: b, Identity: "a", RenewInterval: -time.Second}, "RenewInterval"},
		{"renew interval without room for a retry", Config{Backend: b, Identity: "a", RenewInterval: 8 * time.Second}, "RenewInterval"},
		{"a record lease bound below the own lease", Config{Backend: b, Identity: "a", MaxRecordLeaseDuration: 14 * time.Second}, "MaxRecordLeaseDuration"},
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
		c.RetryPeriod != DefaultRetryPeriod || c.ReleaseHoldOff != DefaultLeaseDuration || c.RenewInterval != 5*time.Second ||
		c.MaxRecordLeaseDuration != 150*time.Second {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

// The default bound on a record's lease duration is ten times the
// candidate's own, never beyond what a record can declare (int32 seconds):
// the longest own lease does not overflow it.
func TestDefaultMaxRecordLeaseDuration(t *testing.T) {
	for _, c := range []struct{ lease, want time.Duration }{
		{15 * time.Second, 150 * time.Second},
		{time.Second, 10 * time.Second},
		{math.MaxInt32 * time.Second, math.MaxInt32 * time.Second},
		{math.MaxInt32 / 10 * time.Second, math.MaxInt32 / 10 * 10 * time.Second},
	} {
		if got := DefaultMaxRecordLeaseDuration(c.lease); got != c.want {
			t.Errorf("DefaultMaxRecordLeaseDuration(%v) = %v, want %v", c.lease, got, c.want)
		}
		if err := ValidateMaxRecordLeaseDuration(DefaultMaxRecordLeaseDuration(c.lease), c.lease); err != nil {
			t.Errorf("the default bound for %v is refused: %v", c.lease, err)
		}
	}
}

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

func TestValidateRenewInterval(t *testing.T) {
	s := time.Second
	cases := []struct {
		name                     string
		interval, renew, retry   time.Duration
		wantErr, mention, naming string
	}{
		{"default: a third of the lease", 5 * s, 10 * s, 2 * s, "", "", ""},
		{"just inside: 7.6s - 1ns", 7600*time.Millisecond - 1, 10 * s, 2 * s, "", "", ""},
		{"one retry period", 2 * s, 10 * s, 2 * s, "", "", ""},
		{"short profile default", s, 2 * s, s / 2, "", "", ""},
		{"leaves exactly 1.2 x retry", 7600 * time.Millisecond, 10 * s, 2 * s, "RenewInterval", "less than the renew deadline (10s) minus 1.2 x retry period (2.4s), 7.6s", "got 7.6s"},
		{"the whole deadline", 10 * s, 10 * s, 2 * s, "RenewInterval", "less than the renew deadline", "got 10s"},
		{"beyond the lease", 20 * s, 10 * s, 2 * s, "RenewInterval", "so a failed renewal is retried", "got 20s"},
		{"zero", 0, 10 * s, 2 * s, "RenewInterval", "greater than 0", "got 0s"},
		{"negative", -s, 10 * s, 2 * s, "RenewInterval", "greater than 0", "got -1s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateRenewInterval(c.interval, c.renew, c.retry)
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != c.wantErr || !strings.Contains(ce.Problem, c.mention) || !strings.Contains(ce.Problem, c.naming) {
				t.Fatalf("got %v, want a ConfigError on %s mentioning %q and %q", err, c.wantErr, c.mention, c.naming)
			}
		})
	}
}

// The default is a third of the lease where that leaves room for a retry,
// and always valid for valid timings.
func TestDefaultRenewInterval(t *testing.T) {
	s := time.Second
	cases := []struct {
		lease, renew, retry, want time.Duration
	}{
		{15 * s, 10 * s, 2 * s, 5 * s},
		{3 * s, 2 * s, s / 2, s},
		{60 * s, 40 * s, 5 * s, 20 * s},
		// A third of the lease (5s) would leave no room: 14s - 12s = 2s of
		// room, half of it.
		{15 * s, 14 * s, 10 * s, s},
		// Barely valid timings still get a valid interval.
		{15 * s, 12*s + 2, 10 * s, 1},
	}
	for _, c := range cases {
		got := DefaultRenewInterval(c.lease, c.renew, c.retry)
		if got != c.want {
			t.Errorf("DefaultRenewInterval(%v, %v, %v) = %v, want %v", c.lease, c.renew, c.retry, got, c.want)
		}
		if err := ValidateTimings(c.lease, c.renew, c.retry); err != nil {
			t.Fatalf("timings %v/%v/%v: %v", c.lease, c.renew, c.retry, err)
		}
		if err := ValidateRenewInterval(got, c.renew, c.retry); err != nil {
			t.Errorf("the default %v for %v/%v/%v is refused: %v", got, c.lease, c.renew, c.retry, err)
		}
	}
}
