package inject

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/leader-sidecar/leader-sidecar/internal/injecttest"
	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The injector on the shared API server: installed once per test binary
// (cluster-scoped policies), in its own namespace.

const (
	injectorNamespace = "leader-sidecar-injector"
	injectLabel       = "leader-sidecar.io/inject"
	markerAnnotation  = "leader-sidecar.io/injected"
	leaseAnnotation   = "leader-sidecar.io/lease"
	sidecarName       = "leader-sidecar"
)

var (
	installOnce sync.Once
	installErr  error
)

// injector installs the injector chart on the shared API server (once)
// and waits until its mutating policy injects a dry-run Pod.
func injector(t *testing.T) *sidecartest.KubeEnv {
	t.Helper()
	k := sidecartest.Kube(t)
	installOnce.Do(func() { installErr = install(t, k) })
	if installErr != nil {
		t.Fatalf("installing the injector: %v", installErr)
	}
	return k
}

// install checks that the API server serves the v1 policy API, creates
// the chart's objects, and polls a dry run until a Pod is injected,
// printing how long the policy took to become active.
func install(t *testing.T, k *sidecartest.KubeEnv) error {
	ctx := context.Background()
	dc, err := discovery.NewDiscoveryClientForConfig(k.Config)
	if err != nil {
		return err
	}
	// The v1 policy API must be served (GA in Kubernetes 1.36).
	res, err := dc.ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		return err
	}
	served := map[string]bool{}
	for _, r := range res.APIResources {
		served[r.Name] = true
	}
	for _, r := range []string{"mutatingadmissionpolicies", "mutatingadmissionpolicybindings",
		"validatingadmissionpolicies", "validatingadmissionpolicybindings"} {
		if !served[r] {
			return fmt.Errorf("the API server does not serve admissionregistration.k8s.io/v1 %s", r)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: injectorNamespace}}
	if _, err := k.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	out, err := renderInjector(t, "")
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	start := time.Now()
	for _, o := range sidecartest.DecodeManifests(t, out).Raw {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return err
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := ri.Create(ctx, o, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
	}
	// Policies take a moment to become active: dry-run a labelled Pod
	// until it comes back injected.
	probeNS := preparedNamespace(t, k)
	tries := 0
	for deadline := time.Now().Add(30 * time.Second); ; {
		tries++
		got, err := dryRun(ctx, k, probeNS, labelledPod("probe"))
		if err == nil && sidecartest.ContainerNamed(got.Spec.InitContainers, sidecarName) != nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no injection %v after the policy was created (last error: %v)", time.Since(start), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "inject: the policy injected after %v (%d dry runs)\n", time.Since(start).Round(time.Millisecond), tries)
	return nil
}

// preparedNamespace is a namespace of the test's own, prepared as
// docs/injection.md's step 2 does (more broadly: any Lease, and the Pod's
// condition and label), for the ServiceAccount of injecttest's Pods.
func preparedNamespace(t *testing.T, k *sidecartest.KubeEnv) string {
	t.Helper()
	ns := k.Namespace(t)
	ctx := context.Background()
	meta := metav1.ObjectMeta{Name: "leader-sidecar", Namespace: ns}
	role := &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "update", "watch", "create"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}},
	}}
	if _, err := k.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: meta.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: injecttest.ServiceAccount, Namespace: ns}}}
	if _, err := k.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The authorizer learns of RBAC objects from a watch: wait until it
	// allows what admission will ask, so that no test races it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		allowed, _, err := injecttest.LeaseUpdateAllowed(ctx, k.Client, ns, injecttest.ServiceAccount, "orders")
		if err == nil && allowed {
			return ns
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Role of namespace %s is not in effect 10s after it was created: %v", ns, err)
		}
	}
}

// renderInjector runs helm template on the injector chart of the
// repository, released into injectorNamespace, with values (YAML).
func renderInjector(t testing.TB, values string) (string, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return sidecartest.RunHelm(t, "template", "injector", sidecartest.RepoPath(t, "charts", "leader-sidecar-injector"),
		"--namespace", injectorNamespace, "--values", file)
}

// dryRun creates pod in ns with a server-side dry run and returns what
// admission made of it.
func dryRun(ctx context.Context, k *sidecartest.KubeEnv, ns string, pod *corev1.Pod) (*corev1.Pod, error) {
	return k.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
}

// mustDryRun is dryRun that fails t on a refusal.
func mustDryRun(t *testing.T, k *sidecartest.KubeEnv, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := dryRun(context.Background(), k, ns, pod)
	if err != nil {
		t.Fatalf("the API server refused Pod %s: %v", pod.Name+pod.GenerateName, err)
	}
	return got
}

// labelledPod is a Pod that opts in, naming its Lease "orders".
func labelledPod(name string) *corev1.Pod { return injecttest.LabelledPod(name) }

// plainPod is a Pod with one app container and nothing else.
func plainPod(name string) *corev1.Pod { return injecttest.PlainPod(name) }

// initNames is the names of the Pod's init containers, in order.
func initNames(p *corev1.Pod) []string { return injecttest.InitNames(p) }

// paramData is the data of the cluster default parameter ConfigMap.
func paramData(t *testing.T) map[string]string {
	t.Helper()
	k := sidecartest.Kube(t)
	cm, err := k.Client.CoreV1().ConfigMaps(injectorNamespace).Get(t.Context(), "leader-sidecar-injector", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data
}

// useNamespaceParam gives ns its own parameter ConfigMap with data and
// labels it leader-sidecar.io/settings=namespace, so the policies use it.
func useNamespaceParam(t *testing.T, k *sidecartest.KubeEnv, ns string, data map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "leader-sidecar-injector"}, Data: data}
	if _, err := k.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nsObj, err := k.Client.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["leader-sidecar.io/settings"] = "namespace"
	if _, err := k.Client.CoreV1().Namespaces().Update(t.Context(), nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// awaitDryRun dry-runs pod in ns until done says so (the policies read
// their parameters from a cache that takes a moment to see a new
// ConfigMap), and returns the last answer.
func awaitDryRun(t *testing.T, k *sidecartest.KubeEnv, ns string, pod *corev1.Pod, done func(*corev1.Pod, error) bool) *corev1.Pod {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		got, err := dryRun(t.Context(), k, ns, pod)
		if done(got, err) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("dry run of %s in %s: still %v, %v", pod.Name, ns, initNames(got), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stringify is v as fmt prints it, for loose checks of rendered objects.
func stringify(v any) string { return fmt.Sprint(v) }
