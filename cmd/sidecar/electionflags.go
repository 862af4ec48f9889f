package main

import (
	"time"

	"github.com/spf13/pflag"

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
