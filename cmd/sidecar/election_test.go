package main

import (
	"strings"
	"testing"
	"time"
)

func TestRenewIntervalDefaultsToAThirdOfTheLease(t *testing.T) {
	cases := []struct {
		args, env []string
		want      time.Duration
	}{
		{nil, nil, 5 * time.Second},
		{[]string{"--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms"}, nil, time.Second},
		{nil, []string{"LEADER_SIDECAR_LEASE_DURATION=30s", "LEADER_SIDECAR_RENEW_DEADLINE=20s"}, 10 * time.Second},
		// A third of the lease would leave no room for a retry: half the room.
		{[]string{"--renew-deadline", "14s", "--retry-period", "10s"}, nil, time.Second},
		{[]string{"--renew-interval", "3s"}, []string{"LEADER_SIDECAR_RENEW_INTERVAL=4s"}, 3 * time.Second},
		{nil, []string{"LEADER_SIDECAR_RENEW_INTERVAL=4s"}, 4 * time.Second},
	}
	for _, c := range cases {
		cfg, err := parseSidecarConfig(c.args, c.env)
		if err != nil {
			t.Errorf("args %v env %v: %v", c.args, c.env, err)
			continue
		}
		if cfg.election.renewInterval != c.want {
			t.Errorf("args %v env %v: renew interval %v, want %v", c.args, c.env, cfg.election.renewInterval, c.want)
		}
	}
}

// A record's lease duration is trusted up to ten times the candidate's
// own unless --max-record-lease-duration says otherwise, and the elector
// is given that bound.
func TestMaxRecordLeaseDurationDefaultsToTenLeases(t *testing.T) {
	cases := []struct {
		args, env []string
		want      time.Duration
	}{
		{nil, nil, 150 * time.Second},
		{nil, []string{"LEADER_SIDECAR_LEASE_DURATION=30s", "LEADER_SIDECAR_RENEW_DEADLINE=20s"}, 300 * time.Second},
		{[]string{"--max-record-lease-duration", "15s"}, nil, 15 * time.Second},
		{nil, []string{"LEADER_SIDECAR_MAX_RECORD_LEASE_DURATION=1h"}, time.Hour},
	}
	for _, c := range cases {
		cfg, err := parseSidecarConfig(c.args, c.env)
		if err != nil {
			t.Errorf("args %v env %v: %v", c.args, c.env, err)
			continue
		}
		if got := cfg.election.electorConfig(nil, nil).MaxRecordLeaseDuration; got != c.want {
			t.Errorf("args %v env %v: the elector trusts a record's lease up to %v, want %v", c.args, c.env, got, c.want)
		}
	}
}

func TestIdentityPrefix(t *testing.T) {
	pod := podFromEnv([]string{"POD_NAME=pod-1"})
	if got := identityPrefix("given", pod); got != "given" {
		t.Fatalf("got %q, want the flag", got)
	}
	if got := identityPrefix("", pod); got != "pod-1" {
		t.Fatalf("got %q, want POD_NAME", got)
	}
	if got := identityPrefix("", podInfo{}); got == "" {
		t.Fatal("empty identity prefix without POD_NAME")
	}
}

func TestAutoPicksTheLeaseBackendInsideACluster(t *testing.T) {
	inside := []string{"KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443"}
	if got := resolveBackend("auto", inside); got != "lease" {
		t.Fatalf("auto inside a cluster: %q, want lease", got)
	}
	if got := resolveBackend("auto", nil); got != "sqlite" {
		t.Fatalf("auto outside a cluster: %q, want sqlite", got)
	}
	if got := resolveBackend("sqlite", inside); got != "sqlite" {
		t.Fatalf("explicit sqlite inside a cluster: %q", got)
	}
	// This process is not in a Pod, so the lease backend it picked cannot
	// load the in-cluster configuration, and the error names the flag to
	// use instead.
	code, _, stderr := runArgs(t, nil, inside...)
	if code != 1 || !strings.Contains(stderr, "backend=lease") || !strings.Contains(stderr, "--kubeconfig: ") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestLeaseBackendStartErrorsNameTheFlag(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     []string
		mention string
	}{
		{"no cluster, no kubeconfig", []string{"--backend", "lease"}, nil, "--kubeconfig: not running in a Kubernetes cluster"},
		{"missing kubeconfig", []string{"--backend", "lease", "--kubeconfig", "/nonexistent/kubeconfig"}, nil, "/nonexistent/kubeconfig\\\" does not exist"},
		{"bad POD_NAMESPACE", []string{"--backend", "lease", "--kubeconfig", kubeconfigFor(t, "https://127.0.0.1:1")}, []string{"POD_NAMESPACE=Not_Valid"}, "from POD_NAMESPACE is not a valid namespace name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runArgs(t, c.args, c.env...)
			if code != 1 || !strings.Contains(stderr, c.mention) {
				t.Fatalf("exit %d, stderr %q; want 1 mentioning %q", code, stderr, c.mention)
			}
		})
	}
}

// The sidecar started with $KUBECONFIG and no --kubeconfig uses the file:
// it gets past loading the configuration and fails on the namespace
// instead (POD_NAMESPACE is not a namespace name).
func TestLeaseBackendReadsKUBECONFIG(t *testing.T) {
	kc := kubeconfigFor(t, "https://127.0.0.1:1")
	code, _, stderr := runArgs(t, []string{"--backend", "lease"}, "KUBECONFIG="+kc, "POD_NAMESPACE=Not_Valid")
	if code != 1 || !strings.Contains(stderr, "from POD_NAMESPACE is not a valid namespace name") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// --backend takes auto and the kinds of openers, and names them all in its
// help; auto resolves to a kind of openers wherever the process runs.
func TestBackendKindsAreTheOpeners(t *testing.T) {
	kinds := backendKinds()
	if kinds[0] != autoBackend || len(kinds) != len(openers)+1 {
		t.Fatalf("--backend takes %q; want auto and the %d kinds of openers", kinds, len(openers))
	}
	help := newSidecarConfig().set.Lookup("backend").Usage
	for _, kind := range kinds {
		if _, ok := openers[kind]; !ok && kind != autoBackend {
			t.Errorf("--backend takes %q, which has no opener", kind)
		}
		if !strings.Contains(help, kind) {
			t.Errorf("the help of --backend does not name %q: %q", kind, help)
		}
	}
	for _, environ := range [][]string{nil, {"KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443"}} {
		if kind := resolveBackend(autoBackend, environ); openers[kind] == nil {
			t.Errorf("auto resolves to %q in %q, which has no opener", kind, environ)
		}
	}
}

// A rule between two timings is reported against the flag set by hand
// (or its variable) when the other is at its default: the one to change.
func TestTimingErrorBlamesTheFlagSet(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--renew-deadline", "20s"}, nil, "--renew-deadline: must be less than the lease duration (15s), got 20s"},
		{nil, []string{"LEADER_SIDECAR_RENEW_DEADLINE=20s"}, "--renew-deadline: must be less than the lease duration (15s), got 20s"},
		{[]string{"--lease-duration", "5s"}, nil, "--lease-duration: must be greater than the renew deadline (10s), got 5s"},
		{[]string{"--retry-period", "9s"}, nil, "--retry-period: must be less than the renew deadline (10s) / 1.2"},
		{[]string{"--renew-deadline", "2s"}, nil, "--renew-deadline: must be greater than 1.2 x retry period (2.4s), got 2s"},
		{[]string{"--renew-deadline", "20s", "--lease-duration", "15s"}, nil, "--lease-duration: must be greater than the renew deadline (20s), got 15s"},
	} {
		code, _, stderr := runArgs(t, append([]string{"check"}, c.args...), c.env...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("check %v %v: exit %d, stderr %q; want 2 and %q", c.args, c.env, code, stderr, c.want)
		}
	}
}
