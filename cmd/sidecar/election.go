package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// electionConfig is the election a candidate joins, the sidecar's and
// sidecar lock's alike: which store, which election, who this candidate
// is, and the timings. addElection and addStore bind the flags straight
// into it; check validates it and resolves, in place, what depends on the
// environment, so nothing that uses it reads flags or the environment
// again. electorConfig turns it into the elector's election.Config.
type electionConfig struct {
	// backend is --backend: auto or a kind of openers; check resolves
	// auto to lease inside a Kubernetes cluster, sqlite elsewhere.
	backend   string
	leaseName string
	// identity is --identity, the prefix; check makes it unique to this
	// process start: prefix_<uuid>.
	identity      string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	// renewInterval, unless given, is derived from the other timings by
	// check.
	renewInterval time.Duration
	// maxRecordLease, unless given, is derived from --lease-duration by
	// check.
	maxRecordLease time.Duration
	sqlite         sqliteConfig
	postgres       postgresConfig
	kube           kubeConfig
	// pod is this process's Pod, from the Downward API variables (check).
	pod podInfo
	// ownedByPod makes a Lease this candidate creates name pod as its
	// owner, when its name and UID are known and the Lease is in its
	// namespace (shard mode's member record, --shard-member-owner pod).
	// Not a flag.
	ownedByPod bool
	// sharedWatch makes the Lease's Backend share the watch of its
	// namespace's Leases with the process's other Backends (shard mode,
	// whose Role may list and watch them all; lease.Options.SharedWatch).
	// Not a flag.
	sharedWatch bool
	// set is the flag set the election's flags are in, to tell a
	// --renew-interval given (flag or variable) from its default.
	set *pflag.FlagSet
}

// addElection defines the flags of the election and the candidate.
func (c *electionConfig) addElection(fs *pflag.FlagSet) {
	fs.StringVar(&c.backend, "backend", autoBackend, "election store: lease, sqlite, postgres, or auto (lease inside a Kubernetes cluster, sqlite elsewhere)")
	docMeaning(fs, "backend", "`lease`, `sqlite`, `postgres`, or `auto`: `lease` inside a Kubernetes Pod (`KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` set), `sqlite` elsewhere; the choice is logged. `postgres` is never chosen by `auto`")
	fs.StringVar(&c.leaseName, "lease-name", "leader-sidecar", "name of the election (the Lease, or the SQLite row); candidates with the same name contend")
	docMeaning(fs, "lease-name", "name of the election; candidates with the same name contend (a DNS subdomain name)")
	fs.StringVar(&c.identity, "identity", "", "identity prefix; a random suffix is added per process start (default $POD_NAME, else the hostname)")
	docDefault(fs, "identity", "`$POD_NAME`, else hostname, else `sidecar`")
	docMeaning(fs, "identity", "identity prefix; `_<uuid>` is appended at every start")
	fs.DurationVar(&c.leaseDuration, "lease-duration", election.DefaultLeaseDuration, "how long a standby waits after the record last changed before taking over (whole seconds)")
	docMeaning(fs, "lease-duration", "how long a standby waits, after it last saw the record change, before taking it over; whole seconds")
	fs.DurationVar(&c.renewDeadline, "renew-deadline", election.DefaultRenewDeadline, "the leader stops claiming this long after its last successful renewal")
	docMeaning(fs, "renew-deadline", "the leader stops claiming this long after the start of its last successful renewal")
	fs.DurationVar(&c.retryPeriod, "retry-period", election.DefaultRetryPeriod, "time from the start of a failed attempt (the leader's too) to the next, and between a standby's attempts")
	docMeaning(fs, "retry-period", "time from the start of a failed attempt (the leader's renewals too) to the next, and between a standby's polls (plus up to 20% jitter)")
	fs.DurationVar(&c.renewInterval, "renew-interval", 0, "the leader renews this long after the start of its last successful renewal (default: --lease-duration / 3, less if that leaves no room for a retry)")
	docDefault(fs, "renew-interval", "`--lease-duration` / 3, or less ([Timings](#timings))")
	docMeaning(fs, "renew-interval", "the leader renews this long after the start of its last successful renewal (5s by default: 12 writes a minute); a failed renewal is retried a `--retry-period` after it started")
	fs.DurationVar(&c.maxRecordLease, "max-record-lease-duration", 0, "the longest lease duration a record is trusted with: a longer one is waited out as this, and reported; at least --lease-duration (default: 10 x --lease-duration)")
	docDefault(fs, "max-record-lease-duration", "10 x `--lease-duration`")
	docMeaning(fs, "max-record-lease-duration", "the longest lease duration a standby trusts a record with: a record that declares a longer one (a client with a bug, a hand edit) is waited out as this and reported (a Warning log line, `leader_sidecar_record_lease_bounded_total`, a `RecordLeaseBounded` Event). At least `--lease-duration`; every candidate of an election must trust the longest `--lease-duration` any of them uses ([Timings](#timings))")
	c.set = fs
}

// addStore defines the flags of the stores.
func (c *electionConfig) addStore(fs *pflag.FlagSet) {
	c.sqlite.add(fs)
	c.postgres.add(fs)
	c.kube.add(fs)
}

// timingFlags names the flag behind each election.Config timing field.
var timingFlags = map[string]string{
	"LeaseDuration":          "--lease-duration",
	"RenewDeadline":          "--renew-deadline",
	"RetryPeriod":            "--retry-period",
	"RenewInterval":          "--renew-interval",
	"MaxRecordLeaseDuration": "--max-record-lease-duration",
}

// timingError names the flag behind a timing rule broken: of a rule
// between two timings, the one set by hand (flag or variable) when the
// other was left at its default (--renew-deadline 20s alone breaks
// "lease duration > renew deadline", and is what to change).
func (c *electionConfig) timingError(ce *election.ConfigError) error {
	given := func(field string) bool {
		return c.set != nil && c.set.Changed(strings.TrimPrefix(timingFlags[field], "--"))
	}
	if ce.Other != "" && given(ce.Other) && !given(ce.Field) {
		return fmt.Errorf("%s: %s", timingFlags[ce.Other], ce.OtherProblem)
	}
	return fmt.Errorf("%s: %s", timingFlags[ce.Field], ce.Problem)
}

// check fills in the defaults of --renew-interval and
// --max-record-lease-duration, checks every setting,
// then resolves what depends on the environment: --backend auto, the
// identity, the kubeconfig, the Pod. Call it once, after the flags and
// the variables are parsed. Its error names the flag and the rule it
// broke.
func (c *electionConfig) check(environ []string) error {
	if c.set == nil || !c.set.Changed("renew-interval") {
		c.renewInterval = election.DefaultRenewInterval(c.leaseDuration, c.renewDeadline, c.retryPeriod)
	}
	if c.set == nil || !c.set.Changed("max-record-lease-duration") {
		c.maxRecordLease = election.DefaultMaxRecordLeaseDuration(c.leaseDuration)
	}
	if kinds := backendKinds(); !slices.Contains(kinds, c.backend) {
		return oneOf("--backend", c.backend, kinds)
	}
	if errs := validation.IsDNS1123Subdomain(c.leaseName); len(errs) > 0 {
		return fmt.Errorf("--lease-name: %q is not a valid name: %s", c.leaseName, strings.Join(errs, "; "))
	}
	if err := checkIdentity(c.identity); err != nil {
		return err
	}
	err := election.ValidateTimings(c.leaseDuration, c.renewDeadline, c.retryPeriod)
	if err == nil {
		err = election.ValidateRenewInterval(c.renewInterval, c.renewDeadline, c.retryPeriod)
	}
	if err == nil {
		err = election.ValidateMaxRecordLeaseDuration(c.maxRecordLease, c.leaseDuration)
	}
	if err != nil {
		var ce *election.ConfigError
		if errors.As(err, &ce) {
			return c.timingError(ce)
		}
		return err
	}
	if err := c.sqlite.check(); err != nil {
		return err
	}
	if err := c.kube.check(); err != nil {
		return err
	}
	if err := c.postgres.check(c.backend == "postgres"); err != nil {
		return err
	}
	c.pod = podFromEnv(environ)
	c.backend = resolveBackend(c.backend, environ)
	c.identity = election.NewIdentity(identityPrefix(c.identity, c.pod))
	c.kube.source = kubeclient.ResolveSource(c.kube.kubeconfig, func(k string) string {
		v, _ := lookup(environ, k)
		return v
	})
	return nil
}

// electorConfig is the election.Config of this candidate on b: the one
// place where the settings of the election become the elector's. The
// command adds what is its own (ReleaseOnCancel, ReleaseHoldOff,
// Observer).
func (c *electionConfig) electorConfig(b backend.Backend, log *slog.Logger) election.Config {
	return election.Config{
		Backend:                b,
		Identity:               c.identity,
		LeaseDuration:          c.leaseDuration,
		RenewDeadline:          c.renewDeadline,
		RetryPeriod:            c.retryPeriod,
		RenewInterval:          c.renewInterval,
		MaxRecordLeaseDuration: c.maxRecordLease,
		Logger:                 log,
	}
}

// sqliteConfig is the SQLite store (--backend sqlite).
type sqliteConfig struct {
	path           string
	busyTimeout    time.Duration
	allowNetworkFS bool
	sharedFile     bool
}

func (c *sqliteConfig) add(fs *pflag.FlagSet) {
	fs.StringVar(&c.path, "sqlite-path", "leader-sidecar.db", "SQLite database file shared by the candidates (local disk only)")
	docMeaning(fs, "sqlite-path", "the SQLite file every candidate shares")
	fs.DurationVar(&c.busyTimeout, "sqlite-busy-timeout", 5*time.Second, "how long a write waits for another process's SQLite lock")
	docMeaning(fs, "sqlite-busy-timeout", "how long a write waits for another process's lock before failing")
	fs.BoolVar(&c.allowNetworkFS, "sqlite-allow-network-fs", false, "allow --sqlite-path on a network filesystem, where SQLite locking is unsafe")
	docMeaning(fs, "sqlite-allow-network-fs", "allow `--sqlite-path` on NFS, SMB, FUSE and the like (unsafe; logs a warning)")
	fs.BoolVar(&c.sharedFile, "sqlite-shared-file", false, "allow --sqlite-path to be a database that holds other tables (shared on purpose): the sidecar adds its tables and switches it to WAL mode for good")
	docMeaning(fs, "sqlite-shared-file", "allow `--sqlite-path` to be a database that already holds other tables (an application's own, shared on purpose). Without it such a file is refused, untouched: the sidecar would add its tables and triggers and switch the file to WAL mode for good")
}

func (c *sqliteConfig) check() error {
	if c.path == "" {
		return errors.New("--sqlite-path: must not be empty")
	}
	if c.busyTimeout < time.Millisecond {
		return fmt.Errorf("--sqlite-busy-timeout: must be at least 1ms, got %v", c.busyTimeout)
	}
	return nil
}

// kubeConfig is the Kubernetes API connection of the Lease store (and of
// the sidecar's Pod publisher and Events).
type kubeConfig struct {
	// kubeconfig is --kubeconfig; check resolves it, with $KUBECONFIG,
	// into source.
	kubeconfig string
	source     kubeclient.Source
	// namespace is --namespace; "" means $POD_NAMESPACE, else the service
	// account's namespace, resolved when the Lease is opened.
	namespace string
	qps       float32
	burst     int
}

func (c *kubeConfig) add(fs *pflag.FlagSet) {
	fs.StringVar(&c.namespace, "namespace", "", "namespace of the Lease (default $POD_NAMESPACE, else the service account's namespace)")
	docDefault(fs, "namespace", "`$POD_NAMESPACE`, else the service account's")
	docMeaning(fs, "namespace", "namespace of the Lease")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file for the lease backend (default: the files in $KUBECONFIG, else the in-cluster service account)")
	docDefault(fs, "kubeconfig", "`$KUBECONFIG`, else in-cluster")
	docMeaning(fs, "kubeconfig", "kubeconfig file for the `lease` backend outside a Pod. Without it the files listed in `$KUBECONFIG` are used (merged as kubectl merges them; missing ones skipped, but not all), else the Pod's service account. `~/.kube/config` is never read.")
	fs.Float32Var(&c.qps, "kube-api-qps", kubeclient.DefaultQPS, "queries per second the election's Kubernetes client may make")
	docMeaning(fs, "kube-api-qps", "rate limit of each of the sidecar's Kubernetes clients (the election's, and the one the Pod publisher and Events share). In shard mode on Leases, unless given: 3 requests per shard per `--renew-interval`, at least 5; a rate below 2 per shard per renew interval is refused (see [Shards](shards.md))")
	fs.IntVar(&c.burst, "kube-api-burst", kubeclient.DefaultBurst, "burst of the election's Kubernetes client")
	docMeaning(fs, "kube-api-burst", "burst of each of those clients. In shard mode on Leases, unless given: the shard count, at least 10")
}

func (c *kubeConfig) check() error {
	if c.qps <= 0 {
		return fmt.Errorf("--kube-api-qps: must be greater than 0, got %v", c.qps)
	}
	if c.burst < 1 {
		return fmt.Errorf("--kube-api-burst: must be at least 1, got %d", c.burst)
	}
	if c.namespace != "" {
		if errs := validation.IsDNS1123Label(c.namespace); len(errs) > 0 {
			return fmt.Errorf("--namespace: %q is not a valid namespace name: %s", c.namespace, strings.Join(errs, "; "))
		}
	}
	return nil
}

// kubeClients are the Kubernetes clients of a candidate of this election
// (package kubeclient): the Lease's, and the Pod publisher's and Events'.
// Every request is bounded by half the renew deadline.
func (c *electionConfig) kubeClients() *kubeclient.Clients {
	return kubeclient.NewClients(c.kube.source, kubeclient.Options{
		Timeout:   c.renewDeadline / 2,
		QPS:       c.kube.qps,
		Burst:     c.kube.burst,
		UserAgent: "leader-sidecar/" + currentVersion(),
	})
}

// podInfo is what the Downward API tells a container about its Pod
// (POD_NAME, POD_NAMESPACE, POD_UID, and its revision); empty outside a
// Pod.
type podInfo struct {
	name, namespace, uid string
	// revision is the Pod's pod-template-hash label (a Deployment's
	// ReplicaSet), else its controller-revision-hash label (a
	// StatefulSet's, a DaemonSet's); "" if neither.
	revision string
}

// The variables the charts and the injector fill from the Pod's revision
// labels (a label the Pod lacks gives "").
const (
	podTemplateHashEnv    = "POD_TEMPLATE_HASH"
	podControllerRevision = "POD_CONTROLLER_REVISION_HASH"
)

func podFromEnv(environ []string) podInfo {
	get := func(k string) string { v, _ := lookup(environ, k); return v }
	revision := get(podTemplateHashEnv)
	if revision == "" {
		revision = get(podControllerRevision)
	}
	return podInfo{name: get("POD_NAME"), namespace: get("POD_NAMESPACE"), uid: get("POD_UID"), revision: revision}
}

// ownerIn is the owner reference to this Pod from an object in namespace,
// or why there is none: its name or UID unknown, or another namespace (an
// owner must be in its dependent's namespace, or the garbage collector
// deletes the dependent as an orphan).
func (p podInfo) ownerIn(namespace string) (metav1.OwnerReference, string) {
	switch {
	case p.name == "" || p.uid == "":
		return metav1.OwnerReference{}, "POD_NAME and POD_UID are not both set"
	case p.namespace != namespace:
		return metav1.OwnerReference{}, fmt.Sprintf("the Pod's namespace (POD_NAMESPACE %q) is not the Lease's (%q)", p.namespace, namespace)
	}
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: p.name, UID: types.UID(p.uid)}, ""
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
	case flag != autoBackend:
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

// store is an opened election store.
type store struct {
	backend backend.Backend
	// lease names the election in answers: "<namespace>/<name>" for a
	// Lease, the name for SQLite and PostgreSQL.
	lease string
	// namespace is the Lease's namespace; "" for the other stores.
	namespace string
	close     func()
}

// opener opens one kind of election store.
type opener func(ctx context.Context, cfg electionConfig, kube *kubeclient.Clients, log *slog.Logger) (*store, error)

// openers maps each kind of election store to its opener: the one list
// of the kinds, which --backend takes (see backendKinds).
var openers = map[string]opener{
	"sqlite":   openSQLite,
	"lease":    openLease,
	"postgres": openPostgres,
}

// autoBackend is the --backend that picks a kind of openers by where the
// process runs (resolveBackend).
const autoBackend = "auto"

// backendKinds are the values --backend takes: auto, then the kinds of
// openers in order.
func backendKinds() []string {
	return append([]string{autoBackend}, slices.Sorted(maps.Keys(openers))...)
}

// openStore opens the store cfg names. Of kube, only the election's
// client is used, and only if the store needs it.
func openStore(ctx context.Context, cfg electionConfig, kube *kubeclient.Clients, log *slog.Logger) (*store, error) {
	return openers[cfg.backend](ctx, cfg, kube, log)
}

func openSQLite(ctx context.Context, cfg electionConfig, _ *kubeclient.Clients, log *slog.Logger) (*store, error) {
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

func openLease(_ context.Context, cfg electionConfig, kube *kubeclient.Clients, log *slog.Logger) (*store, error) {
	client, err := kube.Election()
	if err != nil {
		return nil, err
	}
	getenv := func(k string) string {
		if k == kubeclient.NamespaceEnv {
			return cfg.pod.namespace
		}
		return ""
	}
	namespace, err := kubeclient.ResolveNamespace(cfg.kube.namespace, getenv, "")
	if err != nil {
		return nil, fmt.Errorf("--namespace: %w", err)
	}
	var owners []metav1.OwnerReference
	if cfg.ownedByPod {
		if owner, why := cfg.pod.ownerIn(namespace); why != "" {
			log.Info("the Lease gets no owner reference", "lease", namespace+"/"+cfg.leaseName, "why", why)
		} else {
			owners = []metav1.OwnerReference{owner}
		}
	}
	b, err := lease.New(lease.Options{Client: client, Namespace: namespace, Name: cfg.leaseName, Owners: owners, Logger: log, SharedWatch: cfg.sharedWatch})
	if err != nil {
		return nil, err
	}
	log.Info("lease backend", "lease", namespace+"/"+cfg.leaseName, "kubeconfig", cfg.kube.source.String())
	return &store{backend: b, lease: namespace + "/" + cfg.leaseName, namespace: namespace, close: func() { _ = b.Close() }}, nil
}
