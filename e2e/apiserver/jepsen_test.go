package apiserver

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/settest"
	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The set test of internal/settest on the Lease backend: three sidecars
// elect through one Lease of the shared API server; each replica's app
// appends ids of its own to one list in a PostgreSQL row while it
// believes its sidecar leads; a seeded nemesis pauses the leader's
// sidecar past the lease (its app keeps writing with the term it last
// heard: a stale leader), cuts the leader's sidecar off from the API
// server or slows its path to it, deletes the Lease under the leader,
// restarts the API server (etcd keeps the data), and kills sidecars,
// starting new ones, as new Pods, in their place. Each run has an API
// server of its own, which it may restart under nobody else's tests.
// LEADER_SIDECAR_JEPSEN_DURATION runs the nemesis longer (make jepsen),
// LEADER_SIDECAR_JEPSEN_SEED sets its seed.

// leaseSetConfig is the set test's configuration on a Lease of an API
// server of its own, its list in table of the package's PostgreSQL
// server.
func leaseSetConfig(t *testing.T, table string) settest.Config {
	t.Helper()
	db, err := sql.Open("pgx", postgresServer.Server(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	k := sidecartest.OwnKube(t)
	ns := k.Namespace(t)
	u, err := url.Parse(k.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	// Each sidecar reaches the API server through a proxy of its own,
	// which the nemesis cuts or slows; it also deletes the Lease under
	// the leader.
	var pods atomic.Int64
	var proxied settest.ProxiedStore
	deleteLease := settest.StoreFault{Name: "lease-deleted", Inject: func(*sidecartest.Sidecar) func() {
		if err := k.Client.CoordinationV1().Leases(ns).Delete(context.Background(), "set", metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting the Lease: %v", err)
		}
		return func() {}
	}}
	// A stop lets open watches end within 2 s
	// (kubetest: shutdown-watch-termination-grace-period), then refuses
	// every connection until the API server is started again.
	api := k.Env.ControlPlane.GetAPIServer()
	restart := settest.StoreFault{Name: "api-server-restart", Inject: func(*sidecartest.Sidecar) func() {
		if err := api.Stop(); err != nil {
			t.Errorf("stopping kube-apiserver: %v", err)
		}
		return func() {
			if err := api.Start(); err != nil {
				t.Errorf("starting kube-apiserver again: %v", err)
			}
		}
	}}
	return settest.Config{DB: db, Table: table,
		Launch: func() *sidecartest.Sidecar {
			px := sidecartest.NewTCPProxy(t, u.Host)
			s := sidecartest.LeaseSidecar(t, k.KubeconfigVia(t, px.Addr()), ns, "set", fmt.Sprintf("app-%d", pods.Add(1)))
			proxied.Add(s, px)
			return s
		},
		StoreFaults: append(proxied.Faults(1500*time.Millisecond), deleteLease, restart)}
}

// TestLeaseFencedSetUnderFaults: with fence.SQLGuard checking each
// append's term in its transaction, every acknowledged append is in the
// final list, no id is there twice or without an append that may have
// taken effect, the guard refused some appends (the stale leader
// existed), and porcupine finds the history linearizable as a list under
// atomic appends.
func TestLeaseFencedSetUnderFaults(t *testing.T) {
	t.Parallel()
	settest.Fenced(t, leaseSetConfig(t, "jepsen_fenced_lease"))
}

// TestLeaseUnfencedSetLosesWrites is the unsafe baseline: the same run
// with the apps writing without the guard, in which the checker must find
// a violation.
func TestLeaseUnfencedSetLosesWrites(t *testing.T) {
	t.Parallel()
	settest.Unfenced(t, leaseSetConfig(t, "jepsen_unfenced_lease"))
}
