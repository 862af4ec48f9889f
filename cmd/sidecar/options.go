package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// envPrefix prefixes the environment variable of every flag:
// --lease-duration is also LEADER_SIDECAR_LEASE_DURATION.
const envPrefix = "LEADER_SIDECAR_"

// options is the sidecar's whole configuration, from flags, then
// environment, then defaults.
type options struct {
	backend           string
	leaseName         string
	identity          string
	leaseDuration     time.Duration
	renewDeadline     time.Duration
	retryPeriod       time.Duration
	renewInterval     time.Duration
	releaseHoldOff    time.Duration
	releaseOnShutdown bool
	httpAddress       string
	httpAllowRemote   bool
	opsAddress        string
	sqlitePath        string
	sqliteBusyTimeout time.Duration
	sqliteAllowNetFS  bool
	namespace         string
	kubeconfig        string
	kubeAPIQPS        float32
	kubeAPIBurst      int
	events            bool
	readinessMode     string
	conditionType     string
	roleLabel         string
	logFormat         string
	logLevel          string
	version           bool
}

func newFlagSet(o *options) *pflag.FlagSet {
	fs := pflag.NewFlagSet("sidecar", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.StringVar(&o.backend, "backend", "auto", "election store: lease, sqlite, or auto (lease inside a Kubernetes cluster, sqlite elsewhere)")
	fs.StringVar(&o.leaseName, "lease-name", "leader-sidecar", "name of the election (the Lease, or the SQLite row); candidates with the same name contend")
	fs.StringVar(&o.identity, "identity", "", "identity prefix; a random suffix is added per process start (default $POD_NAME, else the hostname)")
	fs.DurationVar(&o.leaseDuration, "lease-duration", election.DefaultLeaseDuration, "how long a standby waits after the record last changed before taking over (whole seconds)")
	fs.DurationVar(&o.renewDeadline, "renew-deadline", election.DefaultRenewDeadline, "the leader stops claiming this long after its last successful renewal")
	fs.DurationVar(&o.retryPeriod, "retry-period", election.DefaultRetryPeriod, "wait after a failed attempt (the leader's too) and between a standby's attempts")
	fs.DurationVar(&o.renewInterval, "renew-interval", 0, "the leader renews this long after the start of its last successful renewal (default: --lease-duration / 3, less if that leaves no room for a retry)")
	fs.DurationVar(&o.releaseHoldOff, "release-hold-off", 0, "how long POST /leader/release keeps this candidate out of the election (default: --lease-duration)")
	fs.BoolVar(&o.releaseOnShutdown, "release-on-shutdown", true, "release the lease on SIGTERM/SIGINT so a standby takes over at once; safe only if the app stops acting as leader first")
	fs.StringVar(&o.httpAddress, "http-address", "127.0.0.1:4040", "address of the app API; must be loopback (127.0.0.0/8, [::1] or localhost) unless --http-allow-remote")
	fs.BoolVar(&o.httpAllowRemote, "http-allow-remote", false, "allow a non-loopback --http-address. Risky: the app API is unauthenticated, so anyone who can reach the address reads the leader's identity and fencing token from GET /leader and can POST /leader/release to push this replica out of the election, replica after replica")
	fs.StringVar(&o.opsAddress, "ops-address", "", "address of the read-only health, readiness and metrics listener, e.g. :8081 (default: off)")
	fs.StringVar(&o.sqlitePath, "sqlite-path", "leader-sidecar.db", "SQLite database file shared by the candidates (local disk only)")
	fs.DurationVar(&o.sqliteBusyTimeout, "sqlite-busy-timeout", 5*time.Second, "how long a write waits for another process's SQLite lock")
	fs.BoolVar(&o.sqliteAllowNetFS, "sqlite-allow-network-fs", false, "allow --sqlite-path on a network filesystem, where SQLite locking is unsafe")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the Lease (default $POD_NAMESPACE, else the service account's namespace)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file for the lease backend (default: the in-cluster service account)")
	fs.Float32Var(&o.kubeAPIQPS, "kube-api-qps", 5, "queries per second the election's Kubernetes client may make")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 10, "burst of the election's Kubernetes client")
	fs.BoolVar(&o.events, "events", true, "record Kubernetes Events when this sidecar starts or stops leading (needs POD_NAME)")
	fs.StringVar(&o.readinessMode, "readiness-mode", "none", "publish leadership on the Pod: none, probe (use /leader/ready), pod-condition (for readinessGates) or label")
	fs.StringVar(&o.conditionType, "readiness-condition-type", "leader-sidecar.io/leader", "Pod condition kept in pod-condition mode (domain-qualified)")
	fs.StringVar(&o.roleLabel, "role-label", "leader-sidecar.io/role", "Pod label kept in label mode, set to leader or follower")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "version" {
			f.Usage += " [env " + envName(f.Name) + "]"
		}
	})
	return fs
}

func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// parseOptions reads flags, then fills every flag not given from its
// environment variable. Unknown LEADER_SIDECAR_* variables are returned as
// warnings.
func parseOptions(args []string, environ []string, usage io.Writer) (*options, []string, error) {
	o := &options{}
	fs := newFlagSet(o)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(usage, "%s\nFlags:\n%s", usageText(), fs.FlagUsages())
		}
		return nil, nil, err
	}
	if o.version {
		return o, nil, nil // answered before the environment is read
	}
	if fs.NArg() > 0 {
		return nil, nil, fmt.Errorf("unexpected argument %q: sidecar takes flags, or first a command (%s)",
			fs.Arg(0), strings.Join(subcommandNames(), ", "))
	}
	known := map[string]bool{}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		name := envName(f.Name)
		known[name] = true
		value, ok := lookup(environ, name)
		if !ok || f.Changed || err != nil {
			return
		}
		if setErr := fs.Set(f.Name, value); setErr != nil {
			err = fmt.Errorf("%s=%q (--%s): %v", name, value, f.Name, setErr)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	if !fs.Changed("renew-interval") {
		o.renewInterval = election.DefaultRenewInterval(o.leaseDuration, o.renewDeadline, o.retryPeriod)
	}
	var warnings []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, envPrefix) && !known[name] {
			warnings = append(warnings, "ignoring unknown environment variable "+name)
		}
	}
	sort.Strings(warnings)
	return o, warnings, nil
}

func lookup(environ []string, name string) (string, bool) {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// identityPrefix is --identity, else $POD_NAME, else the hostname.
func identityPrefix(o *options, environ []string) string {
	if o.identity != "" {
		return o.identity
	}
	if pod, ok := lookup(environ, "POD_NAME"); ok && pod != "" {
		return pod
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		return host
	}
	return "sidecar"
}
