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

// TestCheckErrorsNameTheVariable: a value the environment set and the
// check refuses is reported with the variable as the user wrote it, then
// the flag; a value from the command line, with the flag alone; a
// PostgreSQL URL from the environment, without its password. So for the
// sidecar, sidecar check and sidecar lock.
func TestCheckErrorsNameTheVariable(t *testing.T) {
	for _, c := range []struct {
		args    []string
		environ []string
		want    string
		notWant string
	}{
		{[]string{"check"}, []string{"LEADER_SIDECAR_BACKEND=etcd"}, `sidecar: LEADER_SIDECAR_BACKEND="etcd": --backend: must be one of`, ""},
		{[]string{"check"}, []string{"LEADER_SIDECAR_RENEW_DEADLINE=20s"}, `sidecar: LEADER_SIDECAR_RENEW_DEADLINE="20s": --renew-deadline: must be less than the lease duration`, ""},
		{[]string{"check", "--renew-deadline", "20s"}, []string{"LEADER_SIDECAR_RENEW_DEADLINE=20s"}, "sidecar: --renew-deadline: must be less than", "LEADER_SIDECAR_RENEW_DEADLINE="},
		{[]string{"lock", "--sqlite-path", "x.db", "--", "true"}, []string{"LEADER_SIDECAR_RETRY_PERIOD=0s"}, `sidecar lock: LEADER_SIDECAR_RETRY_PERIOD="0s": --retry-period:`, ""},
		{[]string{"check"}, []string{"LEADER_SIDECAR_APP_HEALTH_URL=http://probe:s3cret-Pw@10.0.0.7:8080/healthz"},
			`sidecar: LEADER_SIDECAR_APP_HEALTH_URL="http://probe:xxxxx@10.0.0.7:8080/healthz": --app-health-url: must name a loopback host`, "s3cret-Pw"},
		{[]string{"check", "--backend", "postgres"}, []string{"LEADER_SIDECAR_POSTGRES_URL=postgres://app:s3cret-Pw@db:notaport/x"},
			`sidecar: LEADER_SIDECAR_POSTGRES_URL="(a URL that does not parse; not shown)": --postgres-url:`, "s3cret-Pw"},
	} {
		code, _, stderr := runArgs(t, c.args, c.environ...)
		if code != 2 || !strings.HasPrefix(stderr, c.want) || (c.notWant != "" && strings.Contains(stderr, c.notWant)) {
			t.Errorf("%v with %v: exit %d, stderr %q; want 2 beginning %q", c.args, c.environ, code, stderr, c.want)
		}
	}
}
