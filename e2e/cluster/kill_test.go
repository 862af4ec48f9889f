//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// TestExampleChartTakeoverAfterKill kills the leader's sidecar with SIGKILL
// in the node's runtime: nothing releases the Lease, so no candidate (the
// restarted sidecar is a new one) may take over before it has seen the
// record unchanged for the lease duration (15 s, counted from at most one
// renew interval, 5 s, before the kill); the next leader has the next token.
func TestExampleChartTakeoverAfterKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	pods, leader, leaderPod := installExampleWithLeader(t, ctx, ns)
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
	var next fence.LeaderJSON
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

// TestExampleChartTakeoverAfterForceDelete deletes the leader's Pod with
// --grace-period=0 --force. The API object goes at once, but the kubelet
// still stops the containers in order with its minimum grace period: the
// app first, then the native sidecar, which releases the Lease on SIGTERM.
// So the next leader takes over within seconds with the next token, and
// only after the old app has stopped. Should the sidecar be killed before
// it releases, the takeover must wait out the lease duration instead (as in
// TestExampleChartTakeoverAfterKill).
func TestExampleChartTakeoverAfterForceDelete(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	_, leader, leaderPod := installExampleWithLeader(t, ctx, ns)
	// Follow both containers' logs until they exit.
	appLog, sidecarLog := follow(ctx, ns, leaderPod, "app"), follow(ctx, ns, leaderPod, sidecarContainer)
	time.Sleep(time.Second)

	start := time.Now()
	cl.run(t, ctx, cl.kubectl, "delete", "pod", "--namespace", ns, "--grace-period=0", "--force", leaderPod)
	deadline, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	eventually(t, deadline, "the Lease held by another sidecar", func() (bool, string) {
		lease, err := cl.client.CoordinationV1().Leases(ns).Get(ctx, fullName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		h := lease.Spec.HolderIdentity
		if h == nil || *h == "" || *h == leader.Identity {
			return false, fmt.Sprintf("holder %v", h)
		}
		return true, ""
	})
	elapsed := time.Since(start)
	var next fence.LeaderJSON
	var nextPod string
	eventually(t, deadline, "exactly one leader among the Pods that run", func() (bool, string) {
		current, err := cl.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err != nil {
			return false, err.Error()
		}
		var running []corev1.Pod
		for _, p := range current.Items {
			if p.Name != leaderPod && p.DeletionTimestamp == nil && notRunning(p, false) == "" {
				running = append(running, p)
			}
		}
		var reason string
		next, nextPod, reason = oneLeader(ctx, ns, running)
		return reason == "", reason
	})
	t.Logf("%s led with token %d; %s (Pod %s) holds the Lease with token %d %v after the forced delete",
		leader.Identity, *leader.Token, next.Identity, nextPod, *next.Token, elapsed.Round(time.Millisecond))
	if *next.Token != *leader.Token+1 {
		t.Errorf("token %d after %d, want %d", *next.Token, *leader.Token, *leader.Token+1)
	}

	appStopped, released := lastLogged(t, appLog, `"event":"stopped"`), lastLogged(t, sidecarLog, "released the lease", "handed leadership off")
	switch {
	case released.IsZero():
		t.Logf("the sidecar did not release the Lease")
		if elapsed < 10*time.Second {
			t.Errorf("taken over %v after the forced delete without a release, before the lease duration could have passed", elapsed)
		}
	case appStopped.IsZero():
		t.Errorf("the sidecar released the Lease at %v, and the app never said it stopped", released)
	case !appStopped.Before(released):
		t.Errorf("the sidecar released the Lease at %v, not after the app stopped at %v (each the time its process wrote)", released, appStopped)
	default:
		t.Logf("the app stopped %v before the sidecar released the Lease", released.Sub(appStopped))
	}
}

// follow streams the log of a container with the node's timestamps until
// the container exits or ctx ends; the channel gives the whole log then.
func follow(ctx context.Context, ns, pod, container string) <-chan string {
	out := make(chan string, 1)
	go func() {
		log, _ := cl.try(ctx, cl.kubectl, "logs", "--namespace", ns, pod, "--container", container, "--follow", "--timestamps")
		out <- log
	}()
	return out
}

// lastLogged waits up to 30 s for a followed log and returns the instant
// written into its last line that contains one of texts by the process itself
// (slog's time, text or JSON), or the zero time. The node's timestamp
// before each line is when the runtime read it from the container's pipe,
// which can fall behind for one container and not another; both processes
// read one clock, the node's.
func lastLogged(t *testing.T, log <-chan string, texts ...string) time.Time {
	t.Helper()
	var all string
	select {
	case all = <-log:
	case <-time.After(30 * time.Second):
		t.Errorf("a followed log did not end within 30 s of the forced delete")
		return time.Time{}
	}
	var at time.Time
	for _, line := range strings.Split(all, "\n") {
		if !slices.ContainsFunc(texts, func(text string) bool { return strings.Contains(line, text) }) {
			continue
		}
		m := loggedTime.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("no time of its own in the logged line %q", line)
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Errorf("the logged line %q: %v", line, err)
			continue
		}
		at = ts
	}
	return at
}

// loggedTime is the time slog writes into a line, as JSON or as text.
var loggedTime = regexp.MustCompile(`(?:"time":"|\btime=)([0-9][^" ]*)`)
