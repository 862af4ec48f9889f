//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// chartRules is the least privilege the README's "RBAC" section lists for
// the lease backend with Events and the leader's deletion cost, for the
// example chart's Lease.
var chartRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		ResourceNames: []string{fullName}, Verbs: []string{"get", "update", "watch"}},
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
	{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}},
}

// TestSidecarRBACInCluster runs the sidecar as the chart runs it: with the
// chart's ServiceAccount, its projected token and the in-cluster config,
// under the chart's Role, which is exactly the README's least privilege.
// With that Role it elects one leader, renews, and hands over on a delete
// with nothing forbidden; with each permission taken out of the Role before
// the Pod starts, the sidecar keeps running and logs the API server's
// answer naming the permission, as the README says (without watch,
// client-go falls back to a list, which the answer names).
func TestSidecarRBACInCluster(t *testing.T) {
	t.Parallel()
	t.Run("least-privilege", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		ns := cl.namespace(t)
		pods := installExample(t, ctx, ns, 2)
		role, err := cl.client.RbacV1().Roles(ns).Get(ctx, fullName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(role.Rules, chartRules) {
			t.Errorf("the chart's Role has rules %+v, want the README's %+v", role.Rules, chartRules)
		}
		for _, p := range pods {
			inCluster(t, p)
		}
		var leaderPod string
		eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
			var reason string
			_, leaderPod, reason = oneLeader(ctx, ns, pods)
			return reason == "", reason
		})
		// Two renew intervals (5 s each) of renewals, then a release on the
		// way out that the standby sees through its watch.
		time.Sleep(12 * time.Second)
		logs := map[string]string{}
		for _, p := range pods {
			logs[p.Name] = sidecarLogs(t, ctx, ns, p.Name)
		}
		cl.run(t, ctx, cl.kubectl, "delete", "pod", "--namespace", ns, "--wait=true", leaderPod)
		var rest []corev1.Pod
		for _, p := range pods {
			if p.Name != leaderPod {
				rest = append(rest, p)
			}
		}
		deadline, stop := context.WithTimeout(ctx, 10*time.Second)
		defer stop()
		eventually(t, deadline, "the other Pod leads after the leader's Pod was deleted", func() (bool, string) {
			_, _, reason := oneLeader(ctx, ns, rest)
			return reason == "", reason
		})
		logs[rest[0].Name] = sidecarLogs(t, ctx, ns, rest[0].Name)
		for pod, l := range logs {
			if strings.Contains(l, "forbidden") {
				t.Errorf("%s: a request was forbidden under the chart's Role:\n%s", pod, l)
			}
		}
	})

	cases := []struct {
		name    string
		drop    func([]rbacv1.PolicyRule) []rbacv1.PolicyRule
		mention string
	}{
		{"get", dropLeaseVerb("get"), `cannot get resource \"leases\"`},
		{"watch", dropLeaseVerb("watch"), `cannot list resource \"leases\"`},
		{"update", dropLeaseVerb("update"), `cannot update resource \"leases\"`},
		{"create", dropLeaseVerb("create"), `cannot create resource \"leases\"`},
		{"events", func(r []rbacv1.PolicyRule) []rbacv1.PolicyRule { return append(r[:2:2], r[3:]...) }, `cannot create resource \"events\"`},
		// The deletion cost is optional: said once, and the Pod leads.
		{"pods", func(r []rbacv1.PolicyRule) []rbacv1.PolicyRule { return r[:3] }, "the Pod's RBAC does not let this sidecar mark its Pod"},
	}
	for _, c := range cases {
		t.Run("without-"+c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			ns := cl.namespace(t)
			install(t, ctx, ns, "--set", "replicaCount=0", "--wait", "--timeout", "1m")
			role, err := cl.client.RbacV1().Roles(ns).Get(ctx, fullName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			role.Rules = c.drop(role.Rules)
			if _, err := cl.client.RbacV1().Roles(ns).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			cl.run(t, ctx, cl.kubectl, "scale", "deployment", "--namespace", ns, fullName, "--replicas=1")
			pod := runningPods(t, ctx, ns, 1, false)[0]
			var logs string
			eventually(t, ctx, "a log line saying "+c.mention, func() (bool, string) {
				logs = sidecarLogs(t, ctx, ns, pod.Name)
				return strings.Contains(logs, c.mention), "no such line in:\n" + tail(logs, 10)
			})
			for _, line := range strings.Split(logs, "\n") {
				if strings.Contains(line, c.mention) {
					t.Logf("%s", line)
					break
				}
			}
			current, err := cl.client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range current.Status.InitContainerStatuses {
				if s.Name == sidecarContainer && (s.RestartCount != 0 || s.State.Running == nil) {
					t.Errorf("a missing %s permission stopped the sidecar: restarts %d, state %+v", c.name, s.RestartCount, s.State)
				}
			}
		})
	}
}

// dropLeaseVerb returns a function that takes verb out of the Lease rules.
func dropLeaseVerb(verb string) func([]rbacv1.PolicyRule) []rbacv1.PolicyRule {
	return func(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, r := range rules {
			if slices.Contains(r.Resources, "leases") {
				r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == verb })
			}
			if len(r.Verbs) > 0 {
				out = append(out, r)
			}
		}
		return out
	}
}

// inCluster checks that the sidecar of p reaches the API server as the
// chart's ServiceAccount with a projected token and the in-cluster config
// (no kubeconfig given), and that the app gets no token.
func inCluster(t *testing.T, p corev1.Pod) {
	t.Helper()
	if p.Spec.ServiceAccountName != fullName {
		t.Errorf("%s: ServiceAccount %q, want the chart's %q", p.Name, p.Spec.ServiceAccountName, fullName)
	}
	projected := false
	for _, v := range p.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				projected = true
			}
		}
	}
	if !projected {
		t.Errorf("%s: no projected ServiceAccount token volume", p.Name)
	}
	if p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken {
		t.Errorf("%s: the Pod automounts a ServiceAccount token", p.Name)
	}
	for _, c := range p.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" {
				t.Errorf("%s: container %s has the ServiceAccount token", p.Name, c.Name)
			}
		}
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name != sidecarContainer {
			continue
		}
		for _, a := range append(c.Args, c.Command...) {
			if strings.Contains(a, "kubeconfig") {
				t.Errorf("%s: the sidecar is given %q", p.Name, a)
			}
		}
		for _, e := range c.Env {
			if strings.Contains(e.Name, "KUBECONFIG") {
				t.Errorf("%s: the sidecar has %s in its environment", p.Name, e.Name)
			}
		}
	}
}

// sidecarLogs returns the sidecar container's log of pod.
func sidecarLogs(t *testing.T, ctx context.Context, ns, pod string) string {
	t.Helper()
	b, err := cl.client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: sidecarContainer}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s: %v", pod, err)
	}
	return string(b)
}

// tail is the last n lines of text.
func tail(text string, n int) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprint(strings.Join(lines, "\n"))
}
