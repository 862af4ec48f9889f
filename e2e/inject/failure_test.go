package inject

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// Failure containment: a broken parameter (the image key removed from a
// namespace's own ConfigMap) refuses only the Pods that opt in, with the
// ValidatingAdmissionPolicy's message; the other Pods of that namespace
// are admitted as they are.
func TestInjectBrokenParameterRefusesOnlyOptedIn(t *testing.T) {
	k := injector(t)
	ns := preparedNamespace(t, k)
	data := paramData(t)
	delete(data, "image")
	useNamespaceParam(t, k, ns, data)
	const want = `has no key "image"`
	_ = awaitDryRun(t, k, ns, labelledPod("orders-0"), func(_ *corev1.Pod, err error) bool {
		return err != nil && strings.Contains(err.Error(), want)
	})
	_, err := dryRun(t.Context(), k, ns, labelledPod("orders-0"))
	if err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'leader-sidecar-injector'") ||
		!strings.Contains(err.Error(), ns+"/leader-sidecar-injector") {
		t.Fatalf("refusal %v, want the ValidatingAdmissionPolicy's, naming ConfigMap %s/leader-sidecar-injector", err, ns)
	}
	pod := labelledPod("other")
	delete(pod.Labels, injectLabel)
	if got := mustDryRun(t, k, ns, pod); len(got.Spec.InitContainers) != 0 {
		t.Fatalf("an unlabelled Pod was injected: %v", initNames(got))
	}
}

// TestInjectNoLeaseRefused: an opted-in Pod that names no Lease is not
// injected and is refused, saying so.
func TestInjectNoLeaseRefused(t *testing.T) {
	k := injector(t)
	ns := preparedNamespace(t, k)
	pod := plainPod("orders-0")
	pod.Labels = map[string]string{injectLabel: "true"}
	_, err := dryRun(t.Context(), k, ns, pod)
	if err == nil || !strings.Contains(err.Error(), "nothing names its Lease") {
		t.Fatalf("an opted-in Pod with no Lease: %v, want refused by the ValidatingAdmissionPolicy", err)
	}
}

// TestInjectNamespaceWithoutItsParameter: a namespace labelled for its own
// parameter that has none refuses its opted-in Pods and admits the
// others.
func TestInjectNamespaceWithoutItsParameter(t *testing.T) {
	k := injector(t)
	ns := preparedNamespace(t, k)
	nsObj, err := k.Client.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["leader-sidecar.io/settings"] = "namespace"
	if _, err := k.Client.CoreV1().Namespaces().Update(t.Context(), nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server's own message, naming the binding of such namespaces.
	_, err = dryRun(t.Context(), k, ns, labelledPod("orders-0"))
	if err == nil || !strings.Contains(err.Error(), "leader-sidecar-injector-namespace") ||
		!strings.Contains(err.Error(), "no params found") {
		t.Fatalf("an opted-in Pod in a namespace labelled for a parameter it does not have: %v", err)
	}
	pod := labelledPod("other")
	delete(pod.Labels, injectLabel)
	mustDryRun(t, k, ns, pod)
}

// TestInjectBadAnnotationRefused: an annotation that picks a backend or
// readiness mode that does not exist refuses the Pod, naming it, rather
// than injecting a sidecar that would exit at its start.
func TestInjectBadAnnotationRefused(t *testing.T) {
	k := injector(t)
	ns := preparedNamespace(t, k)
	for annotation, value := range map[string]string{
		"leader-sidecar.io/backend":             "etcd",
		"leader-sidecar.io/readiness":           "leader",
		"leader-sidecar.io/wait-for-leadership": "yes",
	} {
		pod := labelledPod("orders-0")
		pod.Annotations[annotation] = value
		_, err := dryRun(t.Context(), k, ns, pod)
		if err == nil || !strings.Contains(err.Error(), "the annotation "+annotation+" is "+value+", not one of") {
			t.Errorf("%s=%s: %v, want refused naming the annotation", annotation, value, err)
		}
	}
}

// TestInjectOffSwitchNamed: a Pod labelled for injection whose annotation
// leader-sidecar.io/injected (set by hand, the way to turn the injection
// off) kept the sidecar out is refused with a message that names that
// annotation, not one that blames the policy.
func TestInjectOffSwitchNamed(t *testing.T) {
	k := injector(t)
	ns := preparedNamespace(t, k)
	for _, value := range []string{"false", "true"} {
		pod := labelledPod("orders-0")
		pod.Annotations[markerAnnotation] = value
		_, err := dryRun(t.Context(), k, ns, pod)
		want := `the annotation leader-sidecar.io/injected is "` + value + `"`
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "is it installed") {
			t.Errorf("injected=%s without the sidecar: %v\nwant refused saying %q", value, err, want)
		}
	}
}

// TestInjectNamespaceParameterValueNamed: a namespace's own parameter,
// which no schema checks, with a setting the sidecar would refuse: the
// opted-in Pods are refused, the message naming the ConfigMap and its key.
func TestInjectNamespaceParameterValueNamed(t *testing.T) {
	k := injector(t)
	ns := preparedNamespace(t, k)
	data := paramData(t)
	data["leaseDuration"] = "15"
	useNamespaceParam(t, k, ns, data)
	want := `the key leaseDuration of ConfigMap ` + ns + `/leader-sidecar-injector is "15": not a duration`
	_ = awaitDryRun(t, k, ns, labelledPod("orders-0"), func(_ *corev1.Pod, err error) bool {
		return err != nil && strings.Contains(err.Error(), want)
	})
}

// TestInjectUnpreparedNamespaceRefused: an opted-in Pod whose
// ServiceAccount may not use its Lease (a namespace nobody prepared) is
// refused at admission, with a message that names the ServiceAccount,
// what it may not do and the step that prepares the namespace, rather
// than admitted to stay unready for good; so is one whose readiness mode
// writes what it may not write. A Pod the namespace is prepared for, and
// one on the sqlite backend, are admitted.
func TestInjectUnpreparedNamespaceRefused(t *testing.T) {
	k := injector(t)
	ns := k.Namespace(t)
	_, err := dryRun(t.Context(), k, ns, labelledPod("orders-0"))
	for _, want := range []string{"ServiceAccount orders lacks what its sidecar needs in namespace " + ns + ": get, update and watch on the Lease orders.",
		"add {namespace: " + ns + ", serviceAccount: orders, lease: orders} to the namespaces values of the leader-sidecar-injector release"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("an opted-in Pod in a namespace nobody prepared: %v; want refused saying %q", err, want)
		}
	}
	sqlite := labelledPod("orders-1")
	sqlite.Annotations["leader-sidecar.io/backend"] = "sqlite"
	mustDryRun(t, k, ns, sqlite)

	// Prepared for the Lease, but not for the label of label mode.
	meta := metav1.ObjectMeta{Name: "lease-only", Namespace: ns}
	if _, err := k.Client.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"orders"}, Verbs: []string{"get", "update", "watch"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Client.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: meta.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "orders", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC reaches the authorizer's cache within moments.
	var got *corev1.Pod
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if got, err = dryRun(t.Context(), k, ns, labelledPod("orders-2")); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || sidecartest.ContainerNamed(got.Spec.InitContainers, sidecarName) == nil {
		t.Fatalf("an opted-in Pod whose ServiceAccount may use its Lease: %v; want it admitted with the sidecar", err)
	}
	label := labelledPod("orders-3")
	label.Annotations["leader-sidecar.io/readiness"] = "label"
	if _, err := dryRun(t.Context(), k, ns, label); err == nil || !strings.Contains(err.Error(), "and patch on pods (readiness mode label)") {
		t.Fatalf("an opted-in Pod in label mode whose ServiceAccount may not patch Pods: %v; want refused naming it", err)
	}
}
