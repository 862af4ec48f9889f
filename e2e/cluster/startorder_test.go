//go:build cluster

package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestExampleChartAppStartsAfterSidecar checks the native sidecar's order
// on every Pod of the example chart: the kubelet starts the app only once
// the sidecar's startup probe (/healthz on the ops port) has passed, so
// the app's first log line comes after the sidecar started serving, by the
// node's timestamps.
func TestExampleChartAppStartsAfterSidecar(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	for _, p := range installExample(t, ctx, ns, 3) {
		serving := firstLogged(t, ctx, ns, p.Name, sidecarContainer, `"msg":"serving"`, `"listener":"ops"`)
		appStart := firstLogged(t, ctx, ns, p.Name, "app")
		t.Logf("%s: sidecar serving at %s, app's first line %v later", p.Name,
			serving.Format(time.RFC3339Nano), appStart.Sub(serving).Round(time.Millisecond))
		if !appStart.After(serving) {
			t.Errorf("%s: the app logged at %v, before its sidecar served at %v", p.Name, appStart, serving)
		}
	}
}

// TestExampleChartWaitForLeadership installs the example chart with
// sidecar.waitForLeadership: only the leader's app container ever starts;
// a standby's Pod waits with its sidecar running and not yet started (its
// startup probe asks /leader/ready). When the leader's Pod is deleted,
// the next leader's app starts, after its sidecar logged that it leads.
func TestExampleChartWaitForLeadership(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	// No --wait: the standbys' Pods are never Ready.
	install(t, ctx, ns, "--set", "replicaCount=3", "--set", "sidecar.waitForLeadership=true")

	leaderPod := ""
	eventually(t, ctx, "one Pod whose app runs, the leader's; two waiting for leadership", func() (bool, string) {
		pods, reason := onlyLeaderAppRuns(ctx, ns, "")
		if reason == "" {
			leaderPod = pods
		}
		return reason == "", reason
	})
	// The standbys stay so: a few seconds more change nothing.
	time.Sleep(5 * time.Second)
	if pod, reason := onlyLeaderAppRuns(ctx, ns, ""); reason != "" || pod != leaderPod {
		t.Fatalf("5 s later: %s leads (was %s); %s", pod, leaderPod, reason)
	}

	cl.run(t, ctx, cl.kubectl, "delete", "pod", "--namespace", ns, "--wait=false", leaderPod)
	next := ""
	eventually(t, ctx, "another Pod leading and running its app", func() (bool, string) {
		pod, reason := onlyLeaderAppRuns(ctx, ns, leaderPod)
		if reason == "" {
			next = pod
		}
		return reason == "" && pod != leaderPod, reason
	})
	leads := firstLogged(t, ctx, ns, next, sidecarContainer, `"msg":"became leader"`)
	appStart := firstLogged(t, ctx, ns, next, "app")
	t.Logf("%s led after %s was deleted; its app's first line %v after it became leader",
		next, leaderPod, appStart.Sub(leads).Round(time.Millisecond))
	if !appStart.After(leads) {
		t.Errorf("%s: the app logged at %v, before its sidecar became leader at %v", next, appStart, leads)
	}
}

// onlyLeaderAppRuns checks the release's Pods, except the one named
// ignore: exactly one leads (by /leader and the Lease), that one runs its
// app with its sidecar started, and every other one has a running,
// not-started sidecar and an app that never started. It returns the
// leader's Pod, or why not.
func onlyLeaderAppRuns(ctx context.Context, ns, ignore string) (string, string) {
	list, err := cl.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
	if err != nil {
		return "", err.Error()
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.Name != ignore && p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	if len(pods) != 3 {
		return "", "not 3 Pods"
	}
	_, leader, reason := oneLeader(ctx, ns, pods)
	if reason != "" {
		return "", reason
	}
	for _, p := range pods {
		sidecar, app := status(p.Status.InitContainerStatuses, sidecarContainer), status(p.Status.ContainerStatuses, "app")
		switch {
		case sidecar == nil || sidecar.State.Running == nil:
			return "", p.Name + ": sidecar not running"
		case p.Name == leader && (sidecar.Started == nil || !*sidecar.Started || app == nil || app.State.Running == nil):
			return "", p.Name + " leads, its app not running yet"
		case p.Name != leader && sidecar.Started != nil && *sidecar.Started:
			return "", p.Name + " does not lead, and its sidecar passed its startup probe"
		case p.Name != leader && app != nil && (app.State.Waiting == nil || app.RestartCount != 0 || app.LastTerminationState.Terminated != nil):
			return "", p.Name + " does not lead, and its app has started"
		}
	}
	return leader, ""
}

func status(ss []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range ss {
		if ss[i].Name == name {
			return &ss[i]
		}
	}
	return nil
}

// firstLogged returns the node's timestamp of the first line of a
// container's log that contains every one of texts (any line with none).
func firstLogged(t *testing.T, ctx context.Context, ns, pod, container string, texts ...string) time.Time {
	t.Helper()
	out := cl.run(t, ctx, cl.kubectl, "logs", "--namespace", ns, pod, "--container", container, "--timestamps")
lines:
	for _, line := range strings.Split(out, "\n") {
		stamp, rest, _ := strings.Cut(line, " ")
		for _, text := range texts {
			if !strings.Contains(rest, text) {
				continue lines
			}
		}
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err == nil {
			return at
		}
	}
	t.Fatalf("%s/%s logged no line with %q:\n%s", pod, container, texts, out)
	return time.Time{}
}

// firstLoggedOneOf is the time of the first line of the container's log
// that contains any of texts; it fails t if there is none.
func firstLoggedOneOf(t *testing.T, ctx context.Context, ns, pod, container string, texts ...string) time.Time {
	t.Helper()
	out := cl.run(t, ctx, cl.kubectl, "logs", "--namespace", ns, pod, "--container", container, "--timestamps")
	for _, line := range strings.Split(out, "\n") {
		stamp, rest, _ := strings.Cut(line, " ")
		for _, text := range texts {
			if !strings.Contains(rest, text) {
				continue
			}
			if at, err := time.Parse(time.RFC3339Nano, stamp); err == nil {
				return at
			}
		}
	}
	t.Fatalf("%s/%s logged no line with any of %q:\n%s", pod, container, texts, out)
	return time.Time{}
}
