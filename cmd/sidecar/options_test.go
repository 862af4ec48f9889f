package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func runArgs(t *testing.T, args []string, environ ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // a run that gets past validation stops at once
	code = run(ctx, args, environ, &out, &errOut)
	return code, out.String(), errOut.String()
}

// sidecarConfigOf parses and checks args and environ as the sidecar does.
func sidecarConfigOf(t *testing.T, args, environ []string) sidecarConfig {
	t.Helper()
	cfg, err := parseSidecarConfig(args, environ)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func parseSidecarConfig(args, environ []string) (sidecarConfig, error) {
	f := newSidecarFlags()
	if err := f.set.Parse(args); err != nil {
		return sidecarConfig{}, err
	}
	if err := applyEnv(f.set, environ); err != nil {
		return sidecarConfig{}, err
	}
	return f.config(environ)
}

func TestInvalidConfigurationExits2NamingTheFlag(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     []string
		mention string
	}{
		{"unknown backend", []string{"--backend", "etcd"}, nil, "--backend: must be one of auto, lease, sqlite"},
		{"namespace not a DNS label", []string{"--namespace", "Prod.Apps"}, nil, "--namespace: \"Prod.Apps\" is not a valid namespace name"},
		{"zero QPS", []string{"--kube-api-qps", "0"}, nil, "--kube-api-qps: must be greater than 0"},
		{"QPS not a number", []string{"--kube-api-qps", "fast"}, nil, `"--kube-api-qps"`},
		{"zero burst", []string{"--kube-api-burst", "0"}, nil, "--kube-api-burst: must be at least 1"},
		{"unknown readiness mode", []string{"--readiness-mode", "leader-only"}, nil, "--readiness-mode: must be one of none, probe, pod-condition, label"},
		{"condition type without a domain", []string{"--readiness-condition-type", "Leader"}, nil, "--readiness-condition-type: must be a domain-qualified name"},
		{"bad role label", []string{"--role-label", "role!"}, nil, "--role-label: \"role!\" is not a valid label key"},
		{"bad events bool", []string{"--events=sometimes"}, nil, `"--events"`},
		{"empty lease name", []string{"--lease-name", ""}, nil, "--lease-name"},
		{"lease name not a DNS name", []string{"--lease-name", "Billing_Job"}, nil, "--lease-name"},
		{"identity with a space", []string{"--identity", "my pod"}, nil, "--identity: must not contain spaces"},
		{"identity with a control character", []string{"--identity", "pod\x01"}, nil, "--identity"},
		{"identity too long", []string{"--identity", strings.Repeat("x", 129)}, nil, "--identity: must be at most 128"},
		{"lease not above renew", []string{"--lease-duration", "10s"}, nil, "--lease-duration: must be greater than the renew deadline"},
		{"lease not whole seconds", []string{"--lease-duration", "15500ms"}, nil, "--lease-duration: must be a whole number of seconds"},
		{"lease not a duration", []string{"--lease-duration", "fifteen"}, nil, `"--lease-duration"`},
		{"renew not above 1.2 x retry", []string{"--renew-deadline", "2s"}, nil, "--renew-deadline: must be greater than 1.2 x retry period"},
		{"zero retry", []string{"--retry-period", "0s"}, nil, "--retry-period: must be greater than 0"},
		{"negative retry", []string{"--retry-period", "-1s"}, nil, "--retry-period: must be greater than 0"},
		{"zero renew interval", []string{"--renew-interval", "0s"}, nil, "--renew-interval: must be greater than 0, got 0s"},
		{"renew interval without room for a retry", []string{"--renew-interval", "8s"}, nil,
			"--renew-interval: must be less than the renew deadline (10s) minus 1.2 x retry period (2.4s), 7.6s, so a failed renewal is retried before the leader stops claiming; got 8s"},
		{"env: renew interval beyond the lease", nil, []string{"LEADER_SIDECAR_RENEW_INTERVAL=20s"}, "--renew-interval: must be less than the renew deadline"},
		{"renew interval checked against given timings", []string{"--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms", "--renew-interval", "1400ms"}, nil,
			"--renew-interval: must be less than the renew deadline (2s) minus 1.2 x retry period (600ms), 1.4s"},
		{"negative hold-off", []string{"--release-hold-off", "-1s"}, nil, "--release-hold-off: must not be negative"},
		{"address without port", []string{"--http-address", "localhost"}, nil, "--http-address: must be host:port"},
		{"port out of range", []string{"--http-address", "127.0.0.1:65536"}, nil, "--http-address: port must be a number"},
		{"app API on every interface", []string{"--http-address", ":4040"}, nil, "--http-address: must be a loopback address"},
		{"app API on the pod IP", []string{"--http-address", "10.0.0.7:4040"}, nil, "--http-address: must be a loopback address"},
		{"env: app API on every interface", nil, []string{"LEADER_SIDECAR_HTTP_ADDRESS=0.0.0.0:4040"}, "--http-address: must be a loopback address"},
		{"env: remote allowed by env, refused by flag", []string{"--http-allow-remote=false"}, []string{"LEADER_SIDECAR_HTTP_ADDRESS=[::]:4040", "LEADER_SIDECAR_HTTP_ALLOW_REMOTE=true"}, "--http-address: must be a loopback address"},
		{"ops port not a number", []string{"--ops-address", ":http"}, nil, "--ops-address: port must be a number"},
		{"ops address equals app address", []string{"--ops-address", "127.0.0.1:4040"}, nil, "--ops-address: must differ from --http-address"},
		{"empty sqlite path", []string{"--sqlite-path", ""}, nil, "--sqlite-path: must not be empty"},
		{"zero busy timeout", []string{"--sqlite-busy-timeout", "0s"}, nil, "--sqlite-busy-timeout: must be at least 1ms"},
		{"bad bool", []string{"--release-on-shutdown=maybe"}, nil, `"--release-on-shutdown"`},
		{"unknown log format", []string{"--log-format", "xml"}, nil, "--log-format: must be one of text, json"},
		{"unknown log level", []string{"--log-level", "loud"}, nil, "--log-level: must be one of debug, info, warn, error"},
		{"unknown flag", []string{"--lease-durration", "15s"}, nil, "unknown flag: --lease-durration"},
		{"positional argument", []string{"sqlite"}, nil, `unexpected argument "sqlite"`},
		{"env: not a duration", nil, []string{"LEADER_SIDECAR_RETRY_PERIOD=2"}, "LEADER_SIDECAR_RETRY_PERIOD=\"2\" (--retry-period)"},
		{"env: bad value caught by validation", nil, []string{"LEADER_SIDECAR_BACKEND=zookeeper"}, "--backend: must be one of"},
		{"env: bad bool", nil, []string{"LEADER_SIDECAR_SQLITE_ALLOW_NETWORK_FS=yes please"}, "(--sqlite-allow-network-fs)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, c.args, c.env...)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, stderr)
			}
			if !strings.Contains(stderr, c.mention) {
				t.Fatalf("stderr %q does not mention %q", stderr, c.mention)
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") != 0 || stdout != "" {
				t.Fatalf("want one line on stderr and nothing on stdout, got %q and %q", stderr, stdout)
			}
		})
	}
}

func TestFlagBeatsEnvironmentBeatsDefault(t *testing.T) {
	env := []string{"LEADER_SIDECAR_RETRY_PERIOD=1s", "LEADER_SIDECAR_LEASE_NAME=from-env"}
	cfg := sidecarConfigOf(t, []string{"--lease-name", "from-flag"}, env)
	el := cfg.election
	if el.leaseName != "from-flag" || el.retryPeriod != time.Second || el.renewDeadline != 10*time.Second {
		t.Fatalf("lease name %q, retry %v, renew %v", el.leaseName, el.retryPeriod, el.renewDeadline)
	}
}

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

func TestUnknownEnvironmentVariableWarns(t *testing.T) {
	warnings := unknownEnv([]string{"LEADER_SIDECAR_LEASE_DURATON=20s", "PATH=/bin", "LEADER_SIDECAR_KILL_GRACE=1s", "LEADER_SIDECAR_TOKEN=7"})
	if len(warnings) != 1 || !strings.Contains(warnings[0], "LEADER_SIDECAR_LEASE_DURATON") {
		t.Fatalf("warnings %q", warnings)
	}
}

func TestHelpAndVersionExit0(t *testing.T) {
	code, stdout, _ := runArgs(t, []string{"--help"})
	if code != 0 || !strings.Contains(stdout, "--lease-duration") || !strings.Contains(stdout, "LEADER_SIDECAR_LEASE_DURATION") {
		t.Fatalf("--help: exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = runArgs(t, []string{"--version"})
	if code != 0 || !strings.HasPrefix(stdout, "sidecar ") {
		t.Fatalf("--version: exit %d, stdout %q", code, stdout)
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

func TestPodReadinessModesNeedThePod(t *testing.T) {
	code, _, stderr := runArgs(t, []string{"--readiness-mode", "label", "--sqlite-path", t.TempDir() + "/x.db",
		"--kubeconfig", kubeconfigFor(t, "https://127.0.0.1:1")}, "POD_NAME=app-0", "POD_NAMESPACE=default")
	if code != 1 || !strings.Contains(stderr, "--readiness-mode label") || !strings.Contains(stderr, "POD_UID") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
