package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// checkUsage is what sidecar check --help prints above the sidecar's flags.
const checkUsage = `Usage: sidecar check [flags]

Checks the sidecar's flags and LEADER_SIDECAR_* variables exactly as the
sidecar would at start (the same parsing, the same rules), without opening
the store, listening or reaching the network, as nginx -t does. Give it the
arguments and the environment of the sidecar's container.

On success it prints the resolved configuration, one setting a line, and
exits 0; warnings the sidecar would log go to stderr. Otherwise it prints
the one-line error the sidecar would print and exits 2.
`

// runCheck is "sidecar check [flags]": parseSidecar, then the resolved
// configuration on stdout (exit 0) or the sidecar's refusal (exit 2).
func runCheck(_ context.Context, p process, args []string) int {
	cfg, answered, err := parseSidecar(p, args, checkUsage, "sidecar check takes the flags of the sidecar")
	if answered {
		return 0
	}
	if err != nil {
		fmt.Fprintf(p.stderr, "sidecar: %v\n", err)
		return 2
	}
	for _, w := range unknownEnv(p.environ) {
		fmt.Fprintf(p.stderr, "sidecar check: warning: %s\n", w)
	}
	if cfg.exposeAppAPI() {
		fmt.Fprintf(p.stderr, "sidecar check: warning: %s (address %s)\n", exposedAppAPIWarning, cfg.httpAddress)
	}
	for _, s := range cfg.settings() {
		fmt.Fprintf(p.stdout, "%s: %s\n", s.name, s.value)
	}
	return 0
}

// setting is one line of sidecar check's output: a flag's name and the
// value the sidecar resolved for it.
type setting struct{ name, value string }

// settings is the resolved configuration in the order of the sidecar's
// flags (--http-allow-remote is told with --http-address), then the Pod.
// It holds no secret: the userinfo of --app-health-url is redacted.
func (c *sidecarConfig) settings() []setting {
	el := c.election
	appAPI := c.httpAddress + " (loopback only)"
	if c.exposeAppAPI() {
		appAPI = c.httpAddress + " (beyond loopback, unauthenticated: --http-allow-remote)"
	}
	holdOff := c.releaseHoldOff.String()
	if c.releaseHoldOff == 0 {
		holdOff = el.leaseDuration.String() + " (--lease-duration)"
	}
	awaitReplacement := "off"
	if c.awaitReplacement > 0 {
		awaitReplacement = c.awaitReplacement.String()
	}
	s := []setting{
		{"backend", el.backend},
		{"lease-name", el.leaseName},
		{"identity", election.IdentityPrefix(el.identity) + "_<a new random suffix at each start>"},
		{"lease-duration", el.leaseDuration.String()},
		{"renew-deadline", el.renewDeadline.String()},
		{"retry-period", el.retryPeriod.String()},
		{"renew-interval", el.renewInterval.String()},
		{"max-record-lease-duration", el.maxRecordLease.String()},
		{"release-hold-off", holdOff},
		{"release-on-shutdown", strconv.FormatBool(c.releaseOnShutdown)},
		{"await-replacement", awaitReplacement},
		{"http-address", appAPI},
		{"ops-address", orOff(c.opsAddress)},
		{"sqlite-path", el.sqlite.path},
		{"sqlite-busy-timeout", el.sqlite.busyTimeout.String()},
		{"sqlite-allow-network-fs", strconv.FormatBool(el.sqlite.allowNetworkFS)},
		{"sqlite-shared-file", strconv.FormatBool(el.sqlite.sharedFile)},
		{"postgres-url", orDefault(redactPostgresURL(el.postgres.url), "(the PG* variables)")},
		{"postgres-schema", orDefault(el.postgres.schema, "(the search_path's first)")},
		{"postgres-table", el.postgres.table},
		{"postgres-signal", el.postgres.signal},
		{"namespace", leaseNamespace(el)},
		{"kubeconfig", el.kube.source.String()},
		{"kube-api-qps", strconv.FormatFloat(float64(el.kube.qps), 'g', -1, 32)},
		{"kube-api-burst", strconv.Itoa(el.kube.burst)},
		{"events", strconv.FormatBool(c.events)},
		{"readiness-mode", string(c.readiness)},
		{"readiness-condition-type", c.conditionType},
		{"role-label", c.roleLabel},
		{"pod-deletion-cost", strconv.FormatBool(c.podDeletionCost)},
		{"app-health-url", orOff(redactURL(c.appHealth.url))},
		{"app-health-period", c.appHealth.period.String()},
		{"app-health-failures", strconv.Itoa(c.appHealth.failures)},
		{"app-health-timeout", c.appHealth.timeout.String()},
	}
	s = append(s, c.shards.settings(&c.election)...)
	s = append(s, setting{"log-format", c.log.format}, setting{"log-level", c.log.level})
	pod := el.pod
	return append(s, setting{"pod", fmt.Sprintf("POD_NAME=%q POD_NAMESPACE=%q POD_UID=%q revision=%q", pod.name, pod.namespace, pod.uid, pod.revision)})
}

// leaseNamespace says which namespace the Lease will be in, as openLease
// resolves it, without reading the service account's file.
func leaseNamespace(el electionConfig) string {
	switch {
	case el.kube.namespace != "":
		return el.kube.namespace
	case el.pod.namespace != "":
		return el.pod.namespace + " (POD_NAMESPACE)"
	default:
		return "the service account's namespace, read at start"
	}
}

// redactURL hides a password in a URL ("http://user:xxxxx@host/...").
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orOff(s string) string {
	if s == "" {
		return "off"
	}
	return s
}
