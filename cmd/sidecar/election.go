package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// electionFlags are the flags of every command that joins an election
// (the sidecar and sidecar lock): which store, which election, who this
// candidate is, and the timings. They are parsed and checked the same way
// for every command.
type electionFlags struct {
	backend           string
	leaseName         string
	identity          string
	leaseDuration     time.Duration
	renewDeadline     time.Duration
	retryPeriod       time.Duration
	renewInterval     time.Duration
	sqlitePath        string
	sqliteBusyTimeout time.Duration
	sqliteAllowNetFS  bool
	sqliteSharedFile  bool
	namespace         string
	kubeconfig        string
	kubeAPIQPS        float32
	kubeAPIBurst      int
	// set is the flag set the election's flags are in, to tell a
	// --renew-interval given (flag or variable) from its default.
	set *pflag.FlagSet
}

// addElection defines the flags of the election and the candidate.
func (f *electionFlags) addElection(fs *pflag.FlagSet) {
	fs.StringVar(&f.backend, "backend", "auto", "election store: lease, sqlite, or auto (lease inside a Kubernetes cluster, sqlite elsewhere)")
	fs.StringVar(&f.leaseName, "lease-name", "leader-sidecar", "name of the election (the Lease, or the SQLite row); candidates with the same name contend")
	fs.StringVar(&f.identity, "identity", "", "identity prefix; a random suffix is added per process start (default $POD_NAME, else the hostname)")
	fs.DurationVar(&f.leaseDuration, "lease-duration", election.DefaultLeaseDuration, "how long a standby waits after the record last changed before taking over (whole seconds)")
	fs.DurationVar(&f.renewDeadline, "renew-deadline", election.DefaultRenewDeadline, "the leader stops claiming this long after its last successful renewal")
	fs.DurationVar(&f.retryPeriod, "retry-period", election.DefaultRetryPeriod, "time from the start of a failed attempt (the leader's too) to the next, and between a standby's attempts")
	fs.DurationVar(&f.renewInterval, "renew-interval", 0, "the leader renews this long after the start of its last successful renewal (default: --lease-duration / 3, less if that leaves no room for a retry)")
	f.set = fs
}

// addStore defines the flags of the two stores.
func (f *electionFlags) addStore(fs *pflag.FlagSet) {
	fs.StringVar(&f.sqlitePath, "sqlite-path", "leader-sidecar.db", "SQLite database file shared by the candidates (local disk only)")
	fs.DurationVar(&f.sqliteBusyTimeout, "sqlite-busy-timeout", 5*time.Second, "how long a write waits for another process's SQLite lock")
	fs.BoolVar(&f.sqliteAllowNetFS, "sqlite-allow-network-fs", false, "allow --sqlite-path on a network filesystem, where SQLite locking is unsafe")
	fs.BoolVar(&f.sqliteSharedFile, "sqlite-shared-file", false, "allow --sqlite-path to be a database that holds other tables (shared on purpose): the sidecar adds its tables and switches it to WAL mode for good")
	fs.StringVar(&f.namespace, "namespace", "", "namespace of the Lease (default $POD_NAMESPACE, else the service account's namespace)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file for the lease backend (default: the files in $KUBECONFIG, else the in-cluster service account)")
	fs.Float32Var(&f.kubeAPIQPS, "kube-api-qps", 5, "queries per second the election's Kubernetes client may make")
	fs.IntVar(&f.kubeAPIBurst, "kube-api-burst", 10, "burst of the election's Kubernetes client")
}

// electionConfig is what a candidate is built from, checked and resolved:
// nothing that uses it reads flags or the environment again.
type electionConfig struct {
	// backend is "lease" or "sqlite" (--backend auto resolved).
	backend   string
	leaseName string
	// identity is unique to this process start: prefix_<uuid>.
	identity      string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	renewInterval time.Duration
	sqlite        sqliteConfig
	kube          kubeConfig
	// pod is this process's Pod, from the Downward API variables.
	pod podInfo
}

type sqliteConfig struct {
	path           string
	busyTimeout    time.Duration
	allowNetworkFS bool
	sharedFile     bool
}

type kubeConfig struct {
	source kubeconfigSource
	// namespace is --namespace; "" means $POD_NAMESPACE, else the service
	// account's namespace, resolved when the Lease is opened.
	namespace string
	qps       float32
	burst     int
}

// podInfo is what the Downward API tells a container about its Pod
// (POD_NAME, POD_NAMESPACE, POD_UID); empty outside a Pod.
type podInfo struct {
	name, namespace, uid string
}

func podFromEnv(environ []string) podInfo {
	get := func(k string) string { v, _ := lookup(environ, k); return v }
	return podInfo{name: get("POD_NAME"), namespace: get("POD_NAMESPACE"), uid: get("POD_UID")}
}

var backends = []string{"auto", "lease", "sqlite"}

// timingFlags names the flag behind each election.Config timing field.
var timingFlags = map[string]string{
	"LeaseDuration": "--lease-duration",
	"RenewDeadline": "--renew-deadline",
	"RetryPeriod":   "--retry-period",
	"RenewInterval": "--renew-interval",
}

// config checks the flags and resolves what depends on the environment:
// --backend auto, the identity, the kubeconfig, the Pod. Its error names
// the flag and the rule it broke.
func (f *electionFlags) config(environ []string) (electionConfig, error) {
	if f.set == nil || !f.set.Changed("renew-interval") {
		f.renewInterval = election.DefaultRenewInterval(f.leaseDuration, f.renewDeadline, f.retryPeriod)
	}
	if err := f.check(); err != nil {
		return electionConfig{}, err
	}
	pod := podFromEnv(environ)
	return electionConfig{
		backend:       resolveBackend(f.backend, environ),
		leaseName:     f.leaseName,
		identity:      election.NewIdentity(identityPrefix(f.identity, pod)),
		leaseDuration: f.leaseDuration,
		renewDeadline: f.renewDeadline,
		retryPeriod:   f.retryPeriod,
		renewInterval: f.renewInterval,
		sqlite:        sqliteConfig{path: f.sqlitePath, busyTimeout: f.sqliteBusyTimeout, allowNetworkFS: f.sqliteAllowNetFS, sharedFile: f.sqliteSharedFile},
		kube: kubeConfig{
			source:    resolveKubeconfig(f.kubeconfig, environ),
			namespace: f.namespace,
			qps:       f.kubeAPIQPS,
			burst:     f.kubeAPIBurst,
		},
		pod: pod,
	}, nil
}

func (f *electionFlags) check() error {
	if !slices.Contains(backends, f.backend) {
		return oneOf("--backend", f.backend, backends)
	}
	if errs := validation.IsDNS1123Subdomain(f.leaseName); len(errs) > 0 {
		return fmt.Errorf("--lease-name: %q is not a valid name: %s", f.leaseName, strings.Join(errs, "; "))
	}
	if err := checkIdentity(f.identity); err != nil {
		return err
	}
	err := election.ValidateTimings(f.leaseDuration, f.renewDeadline, f.retryPeriod)
	if err == nil {
		err = election.ValidateRenewInterval(f.renewInterval, f.renewDeadline, f.retryPeriod)
	}
	if err != nil {
		var ce *election.ConfigError
		if errors.As(err, &ce) {
			return fmt.Errorf("%s: %s", timingFlags[ce.Field], ce.Problem)
		}
		return err
	}
	if f.sqlitePath == "" {
		return errors.New("--sqlite-path: must not be empty")
	}
	if f.sqliteBusyTimeout < time.Millisecond {
		return fmt.Errorf("--sqlite-busy-timeout: must be at least 1ms, got %v", f.sqliteBusyTimeout)
	}
	if f.kubeAPIQPS <= 0 {
		return fmt.Errorf("--kube-api-qps: must be greater than 0, got %v", f.kubeAPIQPS)
	}
	if f.kubeAPIBurst < 1 {
		return fmt.Errorf("--kube-api-burst: must be at least 1, got %d", f.kubeAPIBurst)
	}
	if f.namespace != "" {
		if errs := validation.IsDNS1123Label(f.namespace); len(errs) > 0 {
			return fmt.Errorf("--namespace: %q is not a valid namespace name: %s", f.namespace, strings.Join(errs, "; "))
		}
	}
	return nil
}

// inCluster reports whether the process runs in a Kubernetes Pod, by the
// variables the kubelet sets (client-go's in-cluster check).
func inCluster(environ []string) bool {
	host, _ := lookup(environ, "KUBERNETES_SERVICE_HOST")
	port, _ := lookup(environ, "KUBERNETES_SERVICE_PORT")
	return host != "" && port != ""
}

// resolveBackend turns --backend auto into lease inside a cluster and
// sqlite elsewhere.
func resolveBackend(flag string, environ []string) string {
	switch {
	case flag != "auto":
		return flag
	case inCluster(environ):
		return "lease"
	default:
		return "sqlite"
	}
}

// identityPrefix is --identity, else $POD_NAME, else the hostname.
func identityPrefix(flag string, pod podInfo) string {
	if flag != "" {
		return flag
	}
	if pod.name != "" {
		return pod.name
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		return host
	}
	return "sidecar"
}

const maxIdentityPrefix = 128

func checkIdentity(id string) error {
	if len(id) > maxIdentityPrefix {
		return fmt.Errorf("--identity: must be at most %d bytes, got %d", maxIdentityPrefix, len(id))
	}
	for _, r := range id {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("--identity: must not contain spaces or control characters, got %q", id)
		}
	}
	return nil
}

func oneOf(flag, got string, allowed []string) error {
	return fmt.Errorf("%s: must be one of %s, got %q", flag, strings.Join(allowed, ", "), got)
}

// store is an opened election store.
type store struct {
	backend backend.Backend
	// lease names the election in answers: "<namespace>/<name>" for a
	// Lease, the name for SQLite.
	lease string
	// namespace is the Lease's namespace; "" for SQLite.
	namespace string
	close     func()
}

// opener opens one kind of election store.
type opener func(ctx context.Context, cfg electionConfig, kube *kubeClient, log *slog.Logger) (*store, error)

// openers maps each resolved backend kind to its store.
var openers = map[string]opener{
	"sqlite": openSQLite,
	"lease":  openLease,
}

// openStore opens the store cfg names. kube is the process's one
// Kubernetes client, built only if the store needs it.
func openStore(ctx context.Context, cfg electionConfig, kube *kubeClient, log *slog.Logger) (*store, error) {
	return openers[cfg.backend](ctx, cfg, kube, log)
}

func openSQLite(ctx context.Context, cfg electionConfig, _ *kubeClient, log *slog.Logger) (*store, error) {
	b, err := sqlite.Open(ctx, sqlite.Options{
		Path:           cfg.sqlite.path,
		Election:       cfg.leaseName,
		BusyTimeout:    cfg.sqlite.busyTimeout,
		AllowNetworkFS: cfg.sqlite.allowNetworkFS,
		SharedFile:     cfg.sqlite.sharedFile,
		Logger:         log,
	})
	if err != nil {
		return nil, fmt.Errorf("--sqlite-path: %w", err)
	}
	for _, w := range b.Warnings() {
		log.Warn(w)
	}
	return &store{backend: b, lease: cfg.leaseName, close: func() { _ = b.Close() }}, nil
}

func openLease(_ context.Context, cfg electionConfig, kube *kubeClient, log *slog.Logger) (*store, error) {
	client, err := kube.forElection()
	if err != nil {
		return nil, err
	}
	getenv := func(k string) string {
		if k == lease.NamespaceEnv {
			return cfg.pod.namespace
		}
		return ""
	}
	namespace, err := lease.ResolveNamespace(cfg.kube.namespace, getenv, "")
	if err != nil {
		return nil, fmt.Errorf("--namespace: %w", err)
	}
	b, err := lease.New(lease.Options{Client: client, Namespace: namespace, Name: cfg.leaseName, Logger: log})
	if err != nil {
		return nil, err
	}
	log.Info("lease backend", "lease", namespace+"/"+cfg.leaseName, "kubeconfig", cfg.kube.source.String())
	return &store{backend: b, lease: namespace + "/" + cfg.leaseName, namespace: namespace, close: func() { _ = b.Close() }}, nil
}
