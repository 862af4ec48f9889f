//go:build cluster

package cluster

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestExampleChartUninstallReleasesTheLease: helm uninstall deletes the
// sidecars' RBAC before the stopping leader can release, and the chart's
// post-delete hook releases the Lease instead: after helm uninstall the
// Lease has no holder, in the release shape, with the last token; the
// hook's Job is gone; and a reinstall leads with the next token well
// within a lease duration of its first sidecar's start (before, it waited
// out the gone holder's 15 s lease).
func TestExampleChartUninstallReleasesTheLease(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	pods := installExample(t, ctx, ns, 2)
	var token int64
	eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
		st, _, reason := oneLeader(ctx, ns, pods)
		if reason == "" {
			token = *st.Token
		}
		return reason == "", reason
	})

	began := time.Now()
	cl.run(t, ctx, cl.helm, "uninstall", release, "--namespace", ns, "--wait", "--timeout", "3m")
	uninstalled := time.Since(began)
	l, err := cl.client.CoordinationV1().Leases(ns).Get(ctx, fullName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 1 ||
		ptr.Deref(l.Spec.LeaseTransitions, 0) != int32(token) {
		t.Fatalf("after helm uninstall the Lease names %q, lease %d, token %d; want released (no holder, lease 1) at token %d",
			h, ptr.Deref(l.Spec.LeaseDurationSeconds, 0), ptr.Deref(l.Spec.LeaseTransitions, 0), token)
	}
	if _, err := cl.client.BatchV1().Jobs(ns).Get(ctx, fullName+"-release", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the uninstall hook's Job is still there (%v): its delete policy is hook-succeeded", err)
	}

	install(t, ctx, ns, "--set", "replicaCount=2")
	again := runningPods(t, ctx, ns, 2, false)
	var next int64
	eventually(t, ctx, "exactly one leader after the reinstall", func() (bool, string) {
		st, _, reason := oneLeader(ctx, ns, again)
		if reason == "" {
			next = *st.Token
		}
		return reason == "", reason
	})
	if next != token+1 {
		t.Fatalf("token after the reinstall %d, want %d", next, token+1)
	}
	// When the new leader acquired, against when the first new sidecar
	// started, both on this one node's clock.
	l, err = cl.client.CoordinationV1().Leases(ns).Get(ctx, fullName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var firstStart time.Time
	for _, p := range again {
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if s.Name == "leader-sidecar" && s.State.Running != nil && (firstStart.IsZero() || s.State.Running.StartedAt.Time.Before(firstStart)) {
				firstStart = s.State.Running.StartedAt.Time
			}
		}
	}
	if firstStart.IsZero() || l.Spec.AcquireTime == nil {
		t.Fatalf("no sidecar start (%v) or no acquire time on the Lease (%v)", firstStart, l.Spec.AcquireTime)
	}
	led := l.Spec.AcquireTime.Sub(firstStart)
	t.Logf("helm uninstall took %v (its hook waits out the leader's lease); the reinstall led %v after its first sidecar started, token %d → %d",
		uninstalled.Round(time.Millisecond), led.Round(time.Millisecond), token, next)
	if led >= 10*time.Second {
		t.Fatalf("the reinstall led %v after its first sidecar started: it waited out a holder that is gone (lease 15s)", led)
	}
}
