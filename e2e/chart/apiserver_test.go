package chart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// The charts on a real API server (envtest, started by the first test that
// needs it): the renderings taken in a server-side dry-run and admitted
// under Pod Security "restricted", their RBAC applied for real to a running
// sidecar, and a helm install and uninstall that keeps the Lease.

// dryRunner creates objects with server-side dry-run through a dynamic
// client.
type dryRunner struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newDryRunner(t *testing.T, cfg *rest.Config) *dryRunner {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &dryRunner{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// create sends o to the API server into ns; dryRun only validates and
// admits it. Unknown or duplicate fields are errors (Strict).
func (d *dryRunner) create(ctx context.Context, o *unstructured.Unstructured, ns string, dryRun bool) error {
	gvk := o.GroupVersionKind()
	m, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: %w", gvk, err)
	}
	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var ri dynamic.ResourceInterface = d.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = d.dyn.Resource(m.Resource).Namespace(ns)
	}
	_, err = ri.Create(ctx, o, opts)
	return err
}

func TestChartServerSideDryRun(t *testing.T) {
	dir := sidecartest.Charts(t)
	k := sidecartest.Kube(t)
	d := newDryRunner(t, k.Config)
	ctx := context.Background()
	cases := append(sidecartest.ChartMatrix(), sidecartest.ChartCase{Mode: "pod-condition", Native: true, Backend: "lease", Extra: "lease:\n  create: true"})
	for _, c := range cases {
		t.Run(c.Name(), func(t *testing.T) {
			ns := k.Namespace(t)
			r := sidecartest.RenderChart(t, dir, ns, c.Values())
			for _, o := range r.Raw {
				if err := d.create(ctx, o, ns, true); err != nil {
					t.Fatalf("the API server refused %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			// Nothing was stored.
			if sas, err := k.Client.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			} else if slices.ContainsFunc(sas.Items, func(sa corev1.ServiceAccount) bool { return sa.Name != "default" }) {
				t.Fatalf("dry-run stored ServiceAccounts: %v", sas.Items)
			}
		})
	}
}

// TestChartPodSecurityRestricted admits the Deployment's Pod template as a
// Pod (dry-run) in a namespace that enforces Pod Security "restricted": the
// lease backend passes, and so does its uninstall hook's Job; the sqlite
// backend's hostPath volume is refused, as the chart documents.
func TestChartPodSecurityRestricted(t *testing.T) {
	dir := sidecartest.Charts(t)
	k := sidecartest.Kube(t)
	ctx := context.Background()
	for _, c := range []sidecartest.ChartCase{
		{Mode: "pod-condition", Native: true, Backend: "lease"},
		{Mode: "label", Native: false, Backend: "lease"},
		{Mode: "none", Native: true, Backend: "sqlite"},
	} {
		t.Run(c.Name(), func(t *testing.T) {
			ns := k.Namespace(t)
			nsObj, err := k.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
			nsObj.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
			if _, err := k.Client.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			r := sidecartest.RenderChart(t, dir, ns, c.Values())
			dep := sidecartest.One[*appsv1.Deployment](t, r)
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "probe-pod", Namespace: ns, Labels: dep.Spec.Template.Labels},
				Spec:       dep.Spec.Template.Spec,
			}
			_, err = k.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if c.Backend == "sqlite" {
				if err == nil || !strings.Contains(err.Error(), "hostPath") {
					t.Fatalf("a hostPath volume passed Pod Security restricted: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Pod Security restricted refused the Pod: %v", err)
			}
			hooks := 0
			for _, o := range r.Hooks {
				if job, ok := o.(*batchv1.Job); ok {
					hooks++
					pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hook-pod", Namespace: ns}, Spec: job.Spec.Template.Spec}
					if _, err := k.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
						t.Fatalf("Pod Security restricted refused the uninstall hook's Pod: %v", err)
					}
				}
			}
			if hooks != 1 {
				t.Fatalf("%d hook Jobs rendered, want the uninstall hook's", hooks)
			}
		})
	}
}

// TestChartRBACForReal applies the chart's ServiceAccount, Role and
// RoleBinding (and Lease) to the API server and runs the real sidecar as
// that ServiceAccount: it leads, marks its Pod in the matching mode, logs
// nothing forbidden, and cannot touch another Lease, another namespace, or
// Pods beyond what its mode needs.
func TestChartRBACForReal(t *testing.T) {
	dir := sidecartest.Charts(t)
	for _, c := range []sidecartest.ChartCase{
		{Mode: "none", Native: true, Backend: "lease"},
		{Mode: "pod-condition", Native: true, Backend: "lease"},
		{Mode: "label", Native: false, Backend: "lease"},
		{Mode: "probe", Native: true, Backend: "lease", Extra: "lease:\n  create: true\nevents: false\npodDeletionCost: false"},
	} {
		t.Run(c.Name(), func(t *testing.T) {
			k := sidecartest.Kube(t)
			ctx := context.Background()
			ns := k.Namespace(t)
			r := sidecartest.RenderChart(t, dir, ns, c.Values())
			d := newDryRunner(t, k.Config)
			for _, o := range r.Raw {
				switch o.GetKind() {
				case "ServiceAccount", "Role", "RoleBinding", "Lease":
					if err := d.create(ctx, o, ns, false); err != nil {
						t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
					}
				}
			}
			dep := sidecartest.One[*appsv1.Deployment](t, r)
			sa := dep.Spec.Template.Spec.ServiceAccountName
			user := "system:serviceaccount:" + ns + ":" + sa
			all := append(slices.Clone(dep.Spec.Template.Spec.InitContainers), dep.Spec.Template.Spec.Containers...)
			sc := sidecartest.ContainerNamed(all, "leader-sidecar")
			leaseName := sidecartest.EnvOf(sc)["LEADER_SIDECAR_LEASE_NAME"].Value

			// The rendered container's environment, with the Downward API
			// filled in for a Pod object of our own; the test's timings and
			// loopback addresses given as flags (which win over variables).
			podName := "demo-0"
			uid := k.CreatePod(t, ns, podName)
			var env []string
			for _, e := range sc.Env {
				value := e.Value
				if e.ValueFrom != nil {
					value = map[string]string{"metadata.name": podName, "metadata.namespace": ns, "metadata.uid": uid}[e.ValueFrom.FieldRef.FieldPath]
				}
				env = append(env, e.Name+"="+value)
			}
			kc := k.Kubeconfig(t, user)
			s := sidecartest.Spawn(t, env, "--kubeconfig", kc, "--ops-address", "127.0.0.1:0")
			s.WaitServing()
			_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 15*time.Second)
			k.LeaseShows(t, ns, leaseName, sidecartest.IdentityOf(t, s), token)
			if c.Mode == "pod-condition" || c.Mode == "label" {
				k.AwaitMarked(t, ns, c.Mode, podName)
			}
			time.Sleep(2 * sidecartest.RenewDeadline) // renewals and events go through
			if _, again := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, time.Second); again != token {
				t.Fatalf("token moved from %d to %d", token, again)
			}
			if logs := s.Logs(); strings.Contains(logs, "forbidden") {
				t.Fatalf("the chart's Role lacks a permission the sidecar used:\n%s", logs)
			}

			// What the account must not do.
			cfg := rest.CopyConfig(k.Config)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
			as, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}
			if _, err := k.Client.CoordinationV1().Leases(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			otherNS := k.Namespace(t)
			forbidden := map[string]error{}
			_, forbidden["get another Lease"] = as.CoordinationV1().Leases(ns).Get(ctx, "other", metav1.GetOptions{})
			_, forbidden["update another Lease"] = as.CoordinationV1().Leases(ns).Update(ctx, other, metav1.UpdateOptions{})
			forbidden["delete its own Lease"] = as.CoordinationV1().Leases(ns).Delete(ctx, leaseName, metav1.DeleteOptions{})
			_, forbidden["list Leases"] = as.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			_, forbidden["get its Lease in another namespace"] = as.CoordinationV1().Leases(otherNS).Get(ctx, leaseName, metav1.GetOptions{})
			_, forbidden["create a Lease in another namespace"] = as.CoordinationV1().Leases(otherNS).Create(ctx,
				&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName}}, metav1.CreateOptions{})
			_, forbidden["list Pods"] = as.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			_, forbidden["read Secrets"] = as.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			patch := []byte(`{"metadata":{"labels":{"x":"y"}}}`)
			if c.Mode != "label" && !deletionCost(c) {
				_, forbidden["patch a Pod"] = as.CoreV1().Pods(ns).Patch(ctx, podName, types.MergePatchType, patch, metav1.PatchOptions{})
			}
			if c.Mode != "pod-condition" {
				_, forbidden["patch a Pod's status"] = as.CoreV1().Pods(ns).Patch(ctx, podName, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
			}
			if c.Mode != "pod-condition" && c.Mode != "label" && !deletionCost(c) {
				_, forbidden["get a Pod"] = as.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
			}
			if strings.Contains(c.Extra, "create: true") {
				_, forbidden["create a Lease"] = as.CoordinationV1().Leases(ns).Create(ctx,
					&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
			}
			for what, err := range forbidden {
				if !apierrors.IsForbidden(err) {
					t.Errorf("%s as %s: %v, want Forbidden", what, user, err)
				}
			}
		})
	}
}

// TestChartLeaseSurvivesUninstall installs the example chart with
// sidecar.lease.create on the API server with a real helm, moves the Lease
// on as a few terms would, uninstalls, and checks that the Lease and its
// token are still there; runs the chart's post-delete hook as its Job
// would (this API server runs no Jobs, so helm skips its hooks), under
// the hook's own ServiceAccount and Role, which releases the Lease of the
// holder that is gone, token kept; then installs the same release again,
// which must adopt the kept Lease rather than fail or reset it.
func TestChartLeaseSurvivesUninstall(t *testing.T) {
	dir := sidecartest.Charts(t)
	k := sidecartest.Kube(t)
	ctx := context.Background()
	ns := k.Namespace(t)
	kc := k.Kubeconfig(t, "")
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("sidecar:\n  lease:\n    create: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(dir, "leader-sidecar-example")
	helmIn := func(args ...string) {
		t.Helper()
		if _, err := sidecartest.RunHelm(t, append(args, "--namespace", ns, "--kubeconfig", kc)...); err != nil {
			t.Fatal(err)
		}
	}
	const name = sidecartest.ChartRelease + "-leader-sidecar-example"
	const token = 7

	helmIn("install", sidecartest.ChartRelease, chart, "--values", values)
	leases := k.Client.CoordinationV1().Leases(ns)
	l := k.Lease(t, ns, name)
	l.Spec.HolderIdentity = ptr.To("demo-0_x")
	l.Spec.LeaseDurationSeconds = ptr.To[int32](2)
	l.Spec.LeaseTransitions = ptr.To[int32](token)
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	helmIn("uninstall", sidecartest.ChartRelease, "--no-hooks")
	if _, err := k.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		t.Fatal("helm uninstall left the Deployment: the check below would prove nothing")
	}
	if l := k.Lease(t, ns, name); l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != token {
		t.Fatalf("after helm uninstall the Lease's token is %v, want %d", l.Spec.LeaseTransitions, token)
	}

	rendered, err := sidecartest.TemplateChart(t, dir, ns, "sidecar:\n  lease:\n    create: true\n")
	if err != nil {
		t.Fatal(err)
	}
	job := runUninstallHook(t, k, ns, sidecartest.DecodeManifests(t, rendered))
	if rec := lease.RecordOf(k.Lease(t, ns, name)); !election.IsReleaseShape(rec) || rec.Transitions != token {
		t.Fatalf("after the post-delete hook %s the Lease is %+v; want the release shape at token %d", job, rec, token)
	}

	helmIn("install", sidecartest.ChartRelease, chart, "--values", values)
	if l := k.Lease(t, ns, name); l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != token {
		t.Fatalf("after installing again the Lease's token is %v, want %d", l.Spec.LeaseTransitions, token)
	}
}

// runUninstallHook creates the post-delete hook's ServiceAccount, Role and
// RoleBinding from the rendering r, runs its Job's container (the real
// binary, with the Job's arguments) as that ServiceAccount, and fails t
// unless it exits 0 having released the Lease. It returns the Job's name.
func runUninstallHook(t *testing.T, k *sidecartest.KubeEnv, ns string, r *sidecartest.Rendered) string {
	t.Helper()
	ctx := context.Background()
	var job *batchv1.Job
	for _, o := range r.Hooks {
		var err error
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			_, err = k.Client.CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = k.Client.RbacV1().Roles(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = k.Client.RbacV1().RoleBindings(ns).Create(ctx, o, metav1.CreateOptions{})
		case *batchv1.Job:
			job = o
		default:
			t.Fatalf("a hook of kind %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if job == nil {
		t.Fatal("no post-delete hook Job rendered")
	}
	pod := job.Spec.Template.Spec
	kc := k.Kubeconfig(t, "system:serviceaccount:"+ns+":"+pod.ServiceAccountName)
	cmd := exec.Command(sidecartest.Binary(t), append(pod.Containers[0].Args, "--kubeconfig", kc)...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "released at token") {
		t.Fatalf("the hook's container %v: %v\n%s", pod.Containers[0].Args, err, out)
	}
	return job.Name
}

// TestChartShardUninstallHookReleasesTheShards runs the post-delete hook
// of a shard group of 3 as its Job would, under its own ServiceAccount
// and Role, over shard Leases whose holders are gone: each is released,
// its token kept.
func TestChartShardUninstallHookReleasesTheShards(t *testing.T) {
	dir := sidecartest.Charts(t)
	k := sidecartest.Kube(t)
	ns := k.Namespace(t)
	now := metav1.NewMicroTime(time.Now())
	for i := range 3 {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("jobs-shard-%d", i)}, Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(fmt.Sprintf("gone-%d_x", i)), LeaseDurationSeconds: ptr.To[int32](1),
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To(int32(i + 5))}}
		if _, err := k.Client.CoordinationV1().Leases(ns).Create(context.Background(), l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rendered, err := sidecartest.TemplateChart(t, dir, ns, "sidecar:\n  sharding:\n    enabled: true\n    shards: 3\n    group: jobs\n")
	if err != nil {
		t.Fatal(err)
	}
	job := runUninstallHook(t, k, ns, sidecartest.DecodeManifests(t, rendered))
	for i := range 3 {
		if rec := lease.RecordOf(k.Lease(t, ns, fmt.Sprintf("jobs-shard-%d", i))); !election.IsReleaseShape(rec) || rec.Transitions != int64(i+5) {
			t.Errorf("after the post-delete hook %s shard %d's Lease is %+v; want the release shape at token %d", job, i, rec, i+5)
		}
	}
}
