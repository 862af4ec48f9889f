package chart

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestChartPodPatchPolicy applies a chart's Role and its pod patch policy
// on the API server, and patches Pods as the sidecar's ServiceAccount with
// a token bound to Pod orders-0: the deletion cost and the role label of
// orders-0 change; another Pod, another annotation or label, and the spec
// are refused with a message that says why. Before the policy, the Role
// alone let the ServiceAccount patch the other Pod. The charts: the
// library chart's (through the example chart, rendered where the API
// serves ValidatingAdmissionPolicy), and the injector's for a namespace
// it prepares; the two policies say the same but for whom they bind.
func TestChartPodPatchPolicy(t *testing.T) {
	dir := sidecartest.Charts(t)
	k := sidecartest.Kube(t)
	specs := map[string]admissionv1.ValidatingAdmissionPolicySpec{}
	for _, c := range []struct {
		name   string
		render func(ns string) (string, error)
	}{
		{"library chart", func(ns string) (string, error) {
			values := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(values, []byte("sidecar:\n  readiness:\n    mode: label\n"), 0o644); err != nil {
				return "", err
			}
			return sidecartest.RunHelm(t, "template", sidecartest.ChartRelease, filepath.Join(dir, "leader-sidecar-example"), "--namespace", ns,
				"--values", values, "--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")
		}},
		{"injector", func(ns string) (string, error) {
			return sidecartest.RunHelm(t, "template", "leader-sidecar-injector", sidecartest.RepoPath(t, "charts", "leader-sidecar-injector"),
				"--namespace", "leader-sidecar-injector", "--show-only", "templates/namespaces.yaml", "--set",
				"namespaces[0].namespace="+ns+",namespaces[0].serviceAccount=orders,namespaces[0].createServiceAccount=true,"+
					"namespaces[0].lease=orders,namespaces[0].readinessMode=label")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := k.Namespace(t)
			out, err := c.render(ns)
			if err != nil {
				t.Fatal(err)
			}
			spec := checkPodPatchPolicy(t, k, ns, out)
			spec.MatchConditions = nil // whom it binds: the chart's ServiceAccount
			specs[c.name] = spec
		})
	}
	if lib, inj := specs["library chart"], specs["injector"]; !reflect.DeepEqual(lib, inj) {
		t.Errorf("the injector's pod patch policy says another thing than the library chart's:\n%+v\n%+v", inj, lib)
	}
}

// checkPodPatchPolicy applies the ServiceAccount, Role, RoleBinding and pod
// patch policy of out in ns and checks what the ServiceAccount may patch;
// it returns the policy's spec.
func checkPodPatchPolicy(t *testing.T, k *sidecartest.KubeEnv, ns, out string) admissionv1.ValidatingAdmissionPolicySpec {
	t.Helper()
	ctx := context.Background()
	r := sidecartest.DecodeManifests(t, out)
	var policy *admissionv1.ValidatingAdmissionPolicy
	var binding *admissionv1.ValidatingAdmissionPolicyBinding
	var account string
	for _, o := range r.Objects {
		var err error
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			account = o.Name
			_, err = k.Client.CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = k.Client.RbacV1().Roles(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = k.Client.RbacV1().RoleBindings(ns).Create(ctx, o, metav1.CreateOptions{})
		case *admissionv1.ValidatingAdmissionPolicy:
			policy = o
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			binding = o
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if policy == nil || binding == nil || account == "" {
		t.Fatalf("rendered policy %v, binding %v, ServiceAccount %q: want all three", policy != nil, binding != nil, account)
	}
	for _, name := range []string{"orders-0", "orders-1"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "orders"}, Annotations: map[string]string{"team": "a"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}
		if _, err := k.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(k.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + account,
		Extra: map[string][]string{"authentication.kubernetes.io/pod-name": {"orders-0"}}}
	sidecar, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	patch := func(pod, body string) error {
		_, err := sidecar.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	const cost = `{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"2147483647"}}}`
	if err := patch("orders-1", cost); err != nil {
		t.Fatalf("before the policy, the Role let the ServiceAccount patch another Pod? %v", err)
	}

	if _, err := k.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
	})
	if _, err := k.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	// A policy takes a moment to be enforced.
	var last error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if last = patch("orders-1", `{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"1"}}}`); last != nil || time.Now().After(deadline) {
			break
		}
	}
	if last == nil || !strings.Contains(last.Error(), "only the Pod its token is bound to (orders-0), not orders-1") {
		t.Fatalf("patching another Pod under the policy: %v; want it refused, naming the Pod the token is bound to", last)
	}
	for _, c := range []struct{ name, body, refused string }{
		{"the deletion cost", cost, ""},
		{"the deletion cost taken off", `{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":null}}}`, ""},
		{"the role label", `{"metadata":{"labels":{"leader-sidecar.io/role":"leader"}}}`, ""},
		{"another annotation", `{"metadata":{"annotations":{"team":"b"}}}`, "may change only the annotation controller.kubernetes.io/pod-deletion-cost"},
		{"an annotation removed", `{"metadata":{"annotations":{"team":null}}}`, "may change only the annotation controller.kubernetes.io/pod-deletion-cost"},
		{"another label", `{"metadata":{"labels":{"app":"billing"}}}`, "may change only the label leader-sidecar.io/role"},
		{"the spec", `{"spec":{"activeDeadlineSeconds":60}}`, "may not change a Pod's spec"},
	} {
		err := patch("orders-0", c.body)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s of its own Pod: %v; want it allowed", c.name, err)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s of its own Pod: %v; want it refused saying %q", c.name, err, c.refused)
		}
	}
	return policy.Spec
}
