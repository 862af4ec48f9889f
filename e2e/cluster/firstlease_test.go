//go:build cluster

package cluster

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestUpgradeWithinTheFirstLeaseAddsNoLease: on a fresh install the first
// sidecar creates the Lease and claims it only a lease duration (15 s)
// later. `helm upgrade` four seconds after the Lease was created replaces
// that sidecar's Pod (one replica, the default RollingUpdate) before its
// claim begins. The stopping sidecar releases the Lease once its claim
// could have begun, and the new Pod leads then, with token 2: the first
// term begins within a lease and four seconds of the Lease's creation,
// where waiting out the Lease from its own start (two seconds or more
// after the upgrade) the new Pod would lead no sooner than 21 s after.
// Every Pod is sampled every 100 ms: never two leaders.
func TestUpgradeWithinTheFirstLeaseAddsNoLease(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	install(t, ctx, ns, "--set", "replicaCount=1")
	var created time.Time
	eventually(t, ctx, "the first sidecar creates the Lease", func() (bool, string) {
		l, err := cl.client.CoordinationV1().Leases(ns).Get(ctx, fullName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if ptr.Deref(l.Spec.HolderIdentity, "") == "" {
			return false, "the Lease names no holder"
		}
		created = l.CreationTimestamp.Time
		return true, ""
	})
	runningPods(t, ctx, ns, 1, false)
	s := &sampler{ns: ns, newLeader: make(chan struct{})}
	finishSampling := s.start(ctx)

	time.Sleep(time.Until(created.Add(4 * time.Second)))
	cl.run(t, ctx, cl.helm, "upgrade", release, filepath.Join(cl.root, "charts", "leader-sidecar-example"), "--namespace", ns, "--reuse-values",
		"--set-string", "podAnnotations.e2e/rollout=2")
	var took time.Duration
	eventually(t, ctx, "a leader with token 2", func() (bool, string) {
		l, err := cl.client.CoordinationV1().Leases(ns).Get(ctx, fullName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if ptr.Deref(l.Spec.LeaseTransitions, 0) < 2 || l.Spec.AcquireTime == nil || l.Spec.RenewTime == nil {
			return false, "token " + l.Spec.String()
		}
		took = l.Spec.AcquireTime.Sub(created)
		return true, ""
	})
	select { // the new leader in the samples too
	case <-s.newLeader:
	case <-time.After(30 * time.Second):
	}
	if err := finishSampling(); err != nil {
		t.Fatal(err)
	}
	s.twoLeaders(t, "the upgrade within the first lease")
	t.Logf("token 2 acquired %v after the Lease was created (second resolution); leaders in turn: %q", took.Round(time.Millisecond), s.seen)
	if took >= 15*time.Second+4*time.Second {
		t.Fatalf("the first term began %v after the Lease was created: the new Pod waited the Lease out", took)
	}
	if len(s.seen) != 1 {
		t.Fatalf("leaders in turn %q: want the new Pod alone, the first sidecar never having claimed", s.seen)
	}
}
