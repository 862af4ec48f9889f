package election

import (
	"errors"
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
		c.RetryPeriod != DefaultRetryPeriod || c.ReleaseHoldOff != DefaultLeaseDuration || c.RenewInterval != 5*time.Second {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

func TestNewIdentityIsUniquePerCall(t *testing.T) {
	a, b := NewIdentity("pod-0"), NewIdentity("pod-0")
	if a == b || !strings.HasPrefix(a, "pod-0_") {
		t.Fatalf("identities %q and %q: want distinct, prefixed by pod-0_", a, b)
	}
}
