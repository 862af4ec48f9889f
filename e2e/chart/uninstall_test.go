package chart

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestChartUninstallHook: on the lease backend outside shard mode, with
// the chart's RBAC, the example chart renders a post-delete hook (a
// ServiceAccount, a Role, a RoleBinding and a Job, deleted once it
// succeeds) whose Role may get and update the one Lease and nothing else,
// and whose Job runs sidecar reset --if-abandoned on that Lease (its Pod
// passes Pod Security "restricted": TestChartPodSecurityRestricted).
// In shard mode it covers the group's shard Leases. Nothing is rendered
// where the sidecars release by themselves.
func TestChartUninstallHook(t *testing.T) {
	dir := sidecartest.Charts(t)
	const fullname = sidecartest.ChartRelease + "-leader-sidecar-example"
	r := sidecartest.RenderChart(t, dir, "apps", "sidecar:\n  leaseDuration: 20s\n  renewDeadline: 12s\n")
	if len(r.Hooks) != 4 {
		t.Fatalf("%d hooks rendered, want 4 (ServiceAccount, Role, RoleBinding, Job)", len(r.Hooks))
	}
	var job *batchv1.Job
	var role *rbacv1.Role
	var binding *rbacv1.RoleBinding
	for i, o := range r.Hooks {
		a := r.HookRaw[i].GetAnnotations()
		if a["helm.sh/hook"] != "post-delete" || a["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" {
			t.Errorf("%s %s: hook annotations %v, want a post-delete hook deleted once it succeeds", r.HookRaw[i].GetKind(), r.HookRaw[i].GetName(), a)
		}
		switch o := o.(type) {
		case *batchv1.Job:
			job = o
		case *rbacv1.Role:
			role = o
		case *rbacv1.RoleBinding:
			binding = o
		case *corev1.ServiceAccount:
		default:
			t.Errorf("a hook of kind %T", o)
		}
	}
	if job == nil || role == nil || binding == nil {
		t.Fatalf("hooks %v: want a Job, a Role and a RoleBinding", r.HookRaw)
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{fullname}, Verbs: []string{"get", "update"}}}
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Verbs, want[0].Verbs) || !slices.Equal(role.Rules[0].ResourceNames, want[0].ResourceNames) ||
		!slices.Equal(role.Rules[0].Resources, want[0].Resources) || !slices.Equal(role.Rules[0].APIGroups, want[0].APIGroups) {
		t.Fatalf("the hook's Role grants %+v, want exactly %+v", role.Rules, want)
	}
	pod := job.Spec.Template.Spec
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != pod.ServiceAccountName {
		t.Fatalf("the hook's RoleBinding %+v does not bind Role %s to the Job's ServiceAccount %s", binding, role.Name, pod.ServiceAccountName)
	}
	args := pod.Containers[0].Args
	for _, a := range []string{"reset", "--backend=lease", "--namespace=apps", "--lease-name=" + fullname, "--lease-duration=20s", "--if-abandoned"} {
		if !slices.Contains(args, a) {
			t.Errorf("the hook's Job runs %v, want %s among its arguments", args, a)
		}
	}
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("the hook's Pod restarts %s, want Never (the Job retries)", pod.RestartPolicy)
	}

	// Shard mode: the group's shard Leases, all of them by name.
	r = sidecartest.RenderChart(t, dir, "apps", "sidecar:\n  sharding:\n    enabled: true\n    shards: 3\n    group: jobs\n")
	var shardRole *rbacv1.Role
	var shardJob *batchv1.Job
	for _, o := range r.Hooks {
		switch o := o.(type) {
		case *rbacv1.Role:
			shardRole = o
		case *batchv1.Job:
			shardJob = o
		}
	}
	if shardRole == nil || shardJob == nil {
		t.Fatalf("shard mode: hooks %v, want a Role and a Job", r.HookRaw)
	}
	if names := shardRole.Rules[0].ResourceNames; !slices.Equal(names, []string{"jobs-shard-0", "jobs-shard-1", "jobs-shard-2"}) {
		t.Errorf("shard mode: the hook's Role names %v, want the group's 3 shard Leases", names)
	}
	for _, a := range []string{"--shards=3", "--shard-group=jobs", "--if-abandoned"} {
		if !slices.Contains(shardJob.Spec.Template.Spec.Containers[0].Args, a) {
			t.Errorf("shard mode: the hook's Job runs %v, want %s among its arguments", shardJob.Spec.Template.Spec.Containers[0].Args, a)
		}
	}

	for _, values := range []string{
		"sidecar:\n  releaseOnUninstall: false\n",
		"sidecar:\n  backend: sqlite\n",
		"sidecar:\n  rbac:\n    create: false\n",
	} {
		if r := sidecartest.RenderChart(t, dir, "apps", values); len(r.Hooks) != 0 {
			t.Errorf("with %q the chart renders %d hooks, want none", values, len(r.Hooks))
		}
	}
}
