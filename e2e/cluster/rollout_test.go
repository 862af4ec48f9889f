//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestRolloutMovesLeadershipOnce rolls out the example chart's three
// replicas (readiness mode none) twice under each RollingUpdate shape:
// the default (maxSurge 25%, maxUnavailable 25%) and maxSurge 0 /
// maxUnavailable 1. The leader's Pod carries the deletion cost, so it is
// removed last, and on SIGTERM it hands off to a Pod of the new revision:
// every rollout moves leadership exactly once (the token rises by one;
// each move of a term raises it), and no round of samples of every Pod
// finds two leaders.
func TestRolloutMovesLeadershipOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		set  []string
	}{
		{"default", nil},
		{"maxSurge 0", []string{"--set", "strategy.type=RollingUpdate", "--set", "strategy.rollingUpdate.maxSurge=0",
			"--set", "strategy.rollingUpdate.maxUnavailable=1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			ns := cl.namespace(t)
			install(t, ctx, ns, append([]string{"--set", "replicaCount=3", "--wait", "--timeout", "2m"}, c.set...)...)
			pods := runningPods(t, ctx, ns, 3, true)
			eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
				_, _, reason := oneLeader(ctx, ns, pods)
				return reason == "", reason
			})
			for round := 1; round <= 2; round++ {
				before := leaseToken(t, ctx, ns)
				s := &sampler{ns: ns, newLeader: make(chan struct{})}
				sampling, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				var sampleErr error
				go func() { defer close(done); sampleErr = s.run(sampling) }()
				start := time.Now()
				cl.run(t, ctx, cl.helm, "upgrade", release, filepath.Join(cl.root, "charts", "leader-sidecar-example"), "--namespace", ns,
					"--reuse-values", "--set-string", fmt.Sprintf("podAnnotations.e2e/rollout=%d", round))
				eventually(t, ctx, "the Deployment rolled out", func() (bool, string) { return rolledOut(ctx, ns) })
				rolled := time.Since(start)
				current := runningPods(t, ctx, ns, 3, true)
				eventually(t, ctx, "exactly one leader among the new Pods", func() (bool, string) {
					_, _, reason := oneLeader(ctx, ns, current)
					return reason == "", reason
				})
				stop()
				<-done
				if sampleErr != nil {
					t.Fatal(sampleErr)
				}
				after := leaseToken(t, ctx, ns)
				t.Logf("rollout %d rolled out in %v; %d rounds of samples; leaders in turn %q; token %d → %d",
					round, rolled.Round(time.Millisecond), s.rounds, s.seen, before, after)
				s.twoLeaders(t, fmt.Sprintf("rollout %d", round))
				if after != before+1 {
					t.Errorf("rollout %d moved leadership %d times (token %d → %d), want once", round, after-before, before, after)
				}
			}
		})
	}
}

// leaseToken is the example chart's Lease's token in ns.
func leaseToken(t *testing.T, ctx context.Context, ns string) int32 {
	t.Helper()
	l, err := cl.client.CoordinationV1().Leases(ns).Get(ctx, fullName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(l.Spec.LeaseTransitions, 0)
}
