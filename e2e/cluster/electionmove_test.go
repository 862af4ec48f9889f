//go:build cluster

package cluster

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestUpgradeThatMovesTheElection installs the example chart on Leases
// (three replicas, the default RollingUpdate) and upgrades it to the
// sqlite backend, a change that moves the election to another store: old
// Pods elect on the Lease and new ones in the SQLite file, so side by
// side both would lead. The chart rolls it out as a Recreate. While it
// rolls, every Pod's /leader/ready is asked every 100 ms, all Pods at
// once: no round finds two leaders, and a new Pod leads once it is done.
func TestUpgradeThatMovesTheElection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	dir, _ := sharedDataVolume(t, ctx, ns) // for the SQLite file: a node directory uid 65532 can write
	install(t, ctx, ns, "--set", "replicaCount=3", "--wait", "--timeout", "2m")
	pods := runningPods(t, ctx, ns, 3, true)
	eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
		_, _, reason := oneLeader(ctx, ns, pods)
		return reason == "", reason
	})

	s := &sampler{ns: ns, newStore: true, newLeader: make(chan struct{})}
	finishSampling := s.start(ctx)
	start := time.Now()
	cl.run(t, ctx, cl.helm, "upgrade", release, filepath.Join(cl.root, "charts", "leader-sidecar-example"), "--namespace", ns, "--reuse-values",
		"--set", "sidecar.backend=sqlite", "--set", "sidecar.sqlite.volume.hostPath="+dir)
	d, err := cl.client.AppsV1().Deployments(ns).Get(ctx, fullName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("the upgrade to sqlite rolls out as a %s, want Recreate", d.Spec.Strategy.Type)
	}
	rollout, stopRollout := context.WithTimeout(ctx, 3*time.Minute)
	defer stopRollout()
	eventually(t, rollout, "the Deployment rolled out", func() (bool, string) {
		return rolledOut(rollout, ns)
	})
	rolled := time.Since(start)
	select { // a new leader in the samples
	case <-s.newLeader:
	case <-time.After(time.Minute):
	}
	if err := finishSampling(); err != nil {
		t.Fatal(err)
	}
	t.Logf("rolled out in %v; %d rounds of samples, leaderless from %v to %v (%v)", rolled.Round(time.Millisecond), s.rounds,
		s.lastOld.Sub(start).Round(time.Millisecond), s.firstNew.Sub(start).Round(time.Millisecond), s.firstNew.Sub(s.lastOld).Round(time.Millisecond))
	t.Logf("leaders in turn: %q", s.seen)
	s.twoLeaders(t, "the upgrade to sqlite")
	if s.lastOld.IsZero() || s.firstNew.IsZero() {
		t.Errorf("the samples did not see both the old leader (%v) and a new one (%v)", s.lastOld, s.firstNew)
	}
}
