//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
)

const (
	release = "demo"
	// The example chart's names for release demo.
	fullName         = "demo-leader-sidecar-example"
	sidecarContainer = "leader-sidecar"
)

// TestExampleChartElectsOneLeader installs charts/leader-sidecar-example
// with its defaults (images included) and three replicas: every Pod runs,
// the sidecar as a native sidecar, no container restarts, and exactly one
// sidecar leads: the Lease's holder, with the Lease's token.
func TestExampleChartElectsOneLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	chart := filepath.Join(cl.root, "charts", "leader-sidecar-example")
	cl.run(t, ctx, cl.helm, "dependency", "build", chart)
	cl.run(t, ctx, cl.helm, "install", release, chart, "--namespace", ns,
		"--set", "replicaCount=3", "--wait", "--timeout", "2m")

	var pods []corev1.Pod
	eventually(t, ctx, "three Pods running, every container ready", func() (bool, string) {
		list, err := cl.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/instance=" + release,
		})
		if err != nil {
			return false, err.Error()
		}
		pods = list.Items
		if len(pods) != 3 {
			return false, fmt.Sprintf("%d Pods", len(pods))
		}
		for _, p := range pods {
			if msg := notRunning(p); msg != "" {
				return false, p.Name + ": " + msg
			}
		}
		return true, ""
	})
	for _, p := range pods {
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if s.RestartCount != 0 {
				t.Errorf("%s: container %s restarted %d times", p.Name, s.Name, s.RestartCount)
			}
		}
	}

	eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
		lease, err := cl.client.CoordinationV1().Leases(ns).Get(ctx, fullName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var leaders []httpapi.State
		for _, p := range pods {
			st, err := leaderState(ctx, ns, p.Name)
			if err != nil {
				return false, err.Error()
			}
			if st.Leader {
				leaders = append(leaders, st)
			}
		}
		switch {
		case len(leaders) != 1:
			return false, fmt.Sprintf("%d sidecars answer leader: true", len(leaders))
		case lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != leaders[0].Identity:
			return false, fmt.Sprintf("the leader is %s, the Lease's holder %v", leaders[0].Identity, lease.Spec.HolderIdentity)
		case leaders[0].Token == nil || lease.Spec.LeaseTransitions == nil ||
			*leaders[0].Token != int64(*lease.Spec.LeaseTransitions):
			return false, fmt.Sprintf("the leader's token %v, the Lease's transitions %v", leaders[0].Token, lease.Spec.LeaseTransitions)
		}
		return true, ""
	})
}

// notRunning says why a Pod is not running with every container ready and
// its sidecar a native one (an init container that keeps running), or "".
func notRunning(p corev1.Pod) string {
	if p.Status.Phase != corev1.PodRunning {
		return "phase " + string(p.Status.Phase)
	}
	native := false
	for _, c := range p.Spec.InitContainers {
		if c.Name == sidecarContainer && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			native = true
		}
	}
	if !native {
		return "no native sidecar " + sidecarContainer
	}
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if !s.Ready || s.State.Running == nil {
			return "container " + s.Name + " not running and ready"
		}
	}
	return ""
}

// leaderState asks the sidecar of a Pod for GET /leader on its loopback
// listener, from inside its container (the image has no shell or curl:
// the sidecar's own probe subcommand prints the status and the body).
func leaderState(ctx context.Context, ns, pod string) (httpapi.State, error) {
	var st httpapi.State
	out, err := cl.try(ctx, cl.kubectl, "exec", "--namespace", ns, pod, "--container", sidecarContainer, "--",
		"/sidecar", "probe", "--address", "127.0.0.1:4040", "/leader")
	if err != nil {
		return st, fmt.Errorf("%s: %w", pod, err)
	}
	i := strings.Index(out, "{")
	if i < 0 {
		return st, fmt.Errorf("%s: no JSON in %q", pod, out)
	}
	if err := json.Unmarshal([]byte(out[i:]), &st); err != nil {
		return st, fmt.Errorf("%s: %w in %q", pod, err, out)
	}
	return st, nil
}
