//go:build cluster

package cluster

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
)

// TestExampleChartTakeoverAfterKill kills the leader's sidecar with SIGKILL
// in the node's runtime: nothing releases the Lease, so no candidate (the
// restarted sidecar is a new one) may take over before it has seen the
// record unchanged for the lease duration (15 s, counted from at most one
// renew interval, 5 s, before the kill); the next leader has the next token.
func TestExampleChartTakeoverAfterKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	pods := installExample(t, ctx, ns, 3)
	var leader httpapi.State
	var leaderPod string
	eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
		var reason string
		leader, leaderPod, reason = oneLeader(ctx, ns, pods)
		return reason == "", reason
	})
	pod, err := cl.client.CoreV1().Pods(ns).Get(ctx, leaderPod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for _, s := range pod.Status.InitContainerStatuses {
		if s.Name == sidecarContainer {
			id = strings.TrimPrefix(s.ContainerID, "containerd://")
		}
	}
	if id == "" {
		t.Fatalf("%s: no container ID for %s", leaderPod, sidecarContainer)
	}

	start := time.Now()
	kill := exec.CommandContext(ctx, filepath.Join(cl.root, "hack", "cluster.sh"),
		"exec", "ctr", "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id)
	if out, err := kill.CombinedOutput(); err != nil {
		t.Fatalf("killing the sidecar of %s: %v: %s", leaderPod, err, out)
	}
	deadline, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	var next httpapi.State
	eventually(t, deadline, "a new leader after the leader's sidecar was killed", func() (bool, string) {
		st, _, reason := oneLeader(ctx, ns, pods)
		if reason != "" {
			return false, reason
		}
		if st.Identity == leader.Identity {
			return false, "the killed sidecar still holds the Lease"
		}
		next = st
		return true, ""
	})
	elapsed := time.Since(start)
	t.Logf("%s led with token %d; %s leads with token %d %v after the kill",
		leader.Identity, *leader.Token, next.Identity, *next.Token, elapsed.Round(time.Millisecond))
	if elapsed < 10*time.Second {
		t.Errorf("taken over %v after the kill, before the lease duration could have passed", elapsed)
	}
	if *next.Token != *leader.Token+1 {
		t.Errorf("token %d after %d, want %d", *next.Token, *leader.Token, *leader.Token+1)
	}
}
