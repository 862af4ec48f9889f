package main

import (
	"strings"
	"testing"
	"time"
)

func TestFlagBeatsEnvironmentBeatsDefault(t *testing.T) {
	env := []string{"LEADER_SIDECAR_RETRY_PERIOD=1s", "LEADER_SIDECAR_LEASE_NAME=from-env"}
	cfg := sidecarConfigOf(t, []string{"--lease-name", "from-flag"}, env)
	el := cfg.election
	if el.leaseName != "from-flag" || el.retryPeriod != time.Second || el.renewDeadline != 10*time.Second {
		t.Fatalf("lease name %q, retry %v, renew %v", el.leaseName, el.retryPeriod, el.renewDeadline)
	}
}

func TestUnknownEnvironmentVariableWarns(t *testing.T) {
	warnings := unknownEnv([]string{"LEADER_SIDECAR_LEASE_DURATON=20s", "PATH=/bin", "LEADER_SIDECAR_KILL_GRACE=1s", "LEADER_SIDECAR_TOKEN=7"})
	if len(warnings) != 1 || !strings.Contains(warnings[0], "LEADER_SIDECAR_LEASE_DURATON") {
		t.Fatalf("warnings %q", warnings)
	}
}
