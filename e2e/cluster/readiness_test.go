//go:build cluster

package cluster

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// soak is how long TestReadinessModes watches the Pods for restarts:
// LEADER_SIDECAR_SOAK (a Go duration), default 2m, longer than the lease
// duration and several liveness periods.
func soak(t *testing.T) time.Duration {
	v := os.Getenv("LEADER_SIDECAR_SOAK")
	if v == "" {
		return 2 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("LEADER_SIDECAR_SOAK: %v", err)
	}
	return d
}

// TestReadinessModes installs the example chart (three replicas) in each
// readiness mode and checks, right away and again after a soak: exactly one
// leader, no container restarts (a probe that fails a healthy standby
// shows up here), which Pods are Ready, which Pods the Service's
// EndpointSlices route to, and in mode label the role labels.
//
// The four modes run at once within the one slot of -parallel this test
// takes: most of their time is the soak, spent waiting, and a slot for each
// would keep three more slots idle for as long.
func TestReadinessModes(t *testing.T) {
	t.Parallel()
	const replicas = 3
	var modes sync.WaitGroup
	defer modes.Wait()
	for _, mode := range []string{"none", "probe", "pod-condition", "label"} {
		modes.Go(func() {
			t.Run(mode, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute+soak(t))
				defer cancel()
				ns := cl.namespace(t)
				install(t, ctx, ns, "--set", "replicaCount=3", "--set", "sidecar.readiness.mode="+mode)
				pods := runningPods(t, ctx, ns, replicas, false)
				check := func(when string) {
					t.Helper()
					var leaderPod string
					eventually(t, ctx, when+": exactly one leader and the routing of mode "+mode, func() (bool, string) {
						var reason string
						if _, leaderPod, reason = oneLeader(ctx, ns, pods); reason != "" {
							return false, reason
						}
						return routed(ctx, ns, mode, leaderPod)
					})
					current, err := cl.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
					if err != nil {
						t.Fatal(err)
					}
					for _, p := range current.Items {
						for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
							if s.RestartCount != 0 {
								t.Errorf("%s: %s: container %s restarted %d times", when, p.Name, s.Name, s.RestartCount)
							}
						}
					}
				}
				check("at start")
				time.Sleep(soak(t))
				check("after the soak")
			})
		})
	}
}

// routed says whether the Pods' readiness, role labels and the Service's
// ready endpoints are what mode promises with leaderPod leading.
func routed(ctx context.Context, ns, mode, leaderPod string) (bool, string) {
	list, err := cl.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
	if err != nil {
		return false, err.Error()
	}
	var ready, all []string
	for _, p := range list.Items {
		all = append(all, p.Name)
		if podReady(p) {
			ready = append(ready, p.Name)
		}
		if mode == "label" {
			want := "follower"
			if p.Name == leaderPod {
				want = "leader"
			}
			if got := p.Labels["leader-sidecar.io/role"]; got != want {
				return false, p.Name + " has role label " + got + ", want " + want
			}
		}
	}
	wantReady, wantRouted := all, []string{leaderPod}
	switch mode {
	case "none":
		wantRouted = all
	case "probe", "pod-condition":
		wantReady = []string{leaderPod}
	}
	endpoints, err := readyEndpoints(ctx, ns)
	if err != nil {
		return false, err.Error()
	}
	slices.Sort(ready)
	slices.Sort(wantReady)
	slices.Sort(wantRouted)
	switch {
	case !slices.Equal(ready, wantReady):
		return false, "Ready Pods " + join(ready) + ", want " + join(wantReady)
	case !slices.Equal(endpoints, wantRouted):
		return false, "the Service routes to " + join(endpoints) + ", want " + join(wantRouted)
	}
	return true, ""
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readyEndpoints lists the Pods behind the chart's Service's ready
// endpoints, sorted.
func readyEndpoints(ctx context.Context, ns string) ([]string, error) {
	eps, err := cl.client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + fullName,
	})
	if err != nil {
		return nil, err
	}
	var pods []string
	for _, s := range eps.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready && e.TargetRef != nil {
				pods = append(pods, e.TargetRef.Name)
			}
		}
	}
	slices.Sort(pods)
	return pods, nil
}

func join(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return "[" + strings.Join(names, " ") + "]"
}
