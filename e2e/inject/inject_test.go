package inject

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The shape of what admission makes of a Pod, by server-side dry run on
// the API server with the injector installed.

// initNames is the names of the Pod's init containers, in order.
func initNames(p *corev1.Pod) []string {
	var names []string
	if p == nil {
		return nil
	}
	for _, c := range p.Spec.InitContainers {
		names = append(names, c.Name)
	}
	return names
}

// specJSON is the Pod's spec as JSON, to compare byte for byte.
func specJSON(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	b, err := json.Marshal(p.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInjectLabelledPod(t *testing.T) {
	k := injector(t)
	ns := k.Namespace(t)
	pod := labelledPod("orders-0")
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "migrate", Image: "registry.example/migrate:1"},
		{Name: "warm", Image: "registry.example/warm:1"},
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Annotations["team"] = "shop"
	got := mustDryRun(t, k, ns, pod)

	if names := initNames(got); !slices.Equal(names, []string{sidecarName, "migrate", "warm"}) {
		t.Fatalf("init containers %v, want the sidecar first, then the Pod's own in order", names)
	}
	sc := got.Spec.InitContainers[0]
	if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("the sidecar's restartPolicy is %v, want Always (a native sidecar)", sidecartest.Deref(sc.RestartPolicy))
	}
	env := sidecartest.EnvOf(&sc)
	if v := env["LEADER_SIDECAR_LEASE_NAME"].Value; v != "orders" {
		t.Fatalf("LEADER_SIDECAR_LEASE_NAME=%q, want the annotation's orders", v)
	}
	if f := env["POD_NAME"].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "metadata.name" {
		t.Fatalf("POD_NAME is not the Downward API's metadata.name: %+v", env["POD_NAME"])
	}
	if got.Annotations[markerAnnotation] != "true" || got.Annotations["team"] != "shop" || got.Annotations[leaseAnnotation] != "orders" {
		t.Fatalf("annotations %v, want the Pod's own and %s=true", got.Annotations, markerAnnotation)
	}
	var vols []string
	for _, v := range got.Spec.Volumes {
		vols = append(vols, v.Name)
	}
	if !slices.Equal(vols, []string{"data", "leader-sidecar-token"}) {
		t.Fatalf("volumes %v, want the Pod's own, then the sidecar's token", vols)
	}
	// The token is mounted in the sidecar only.
	if app := got.Spec.Containers[0]; len(app.VolumeMounts) != 0 {
		t.Fatalf("the app container mounts %v", app.VolumeMounts)
	}
	for _, c := range got.Spec.InitContainers[1:] {
		if len(c.VolumeMounts) != 0 || len(c.Env) != 0 {
			t.Fatalf("init container %s changed: %+v", c.Name, c)
		}
	}
}

// TestInjectBarePod: a Pod with no init containers, volumes, annotations
// or readiness gates, named from generateName, its Lease named by its
// app.kubernetes.io/name label, in pod-condition mode (which adds a
// readiness gate) is injected: every list and map is created.
func TestInjectBarePod(t *testing.T) {
	k := injector(t)
	ns := k.Namespace(t)
	pod := plainPod("")
	pod.GenerateName = "orders-"
	pod.Labels = map[string]string{injectLabel: "true", "app.kubernetes.io/name": "orders"}
	got := mustDryRun(t, k, ns, pod)
	if names := initNames(got); !slices.Equal(names, []string{sidecarName}) {
		t.Fatalf("init containers %v, want the sidecar alone", names)
	}
	if !strings.HasPrefix(got.Name, "orders-") {
		t.Fatalf("name %q, want one made from generateName orders-", got.Name)
	}
	if v := sidecartest.EnvOf(&got.Spec.InitContainers[0])["LEADER_SIDECAR_LEASE_NAME"].Value; v != "orders" {
		t.Fatalf("LEADER_SIDECAR_LEASE_NAME=%q, want the label's orders", v)
	}
	if len(got.Spec.Volumes) != 1 || got.Annotations[markerAnnotation] != "true" {
		t.Fatalf("volumes %v annotations %v", got.Spec.Volumes, got.Annotations)
	}

	pod.Annotations = map[string]string{"leader-sidecar.io/readiness": "pod-condition"}
	got = mustDryRun(t, k, ns, pod)
	if g := got.Spec.ReadinessGates; len(g) != 1 || g[0].ConditionType != "leader-sidecar.io/leader" {
		t.Fatalf("readiness gates %v, want leader-sidecar.io/leader", g)
	}
}

// TestInjectAlreadyInjectedUnchanged sends an injected Pod again: the
// "not yet injected" match condition holds it back, so it comes back as
// it went, with one sidecar.
func TestInjectAlreadyInjectedUnchanged(t *testing.T) {
	k := injector(t)
	ns := k.Namespace(t)
	first := mustDryRun(t, k, ns, labelledPod("orders-0"))
	again := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: first.Name, Labels: first.Labels, Annotations: first.Annotations},
		Spec:       first.Spec,
	}
	second := mustDryRun(t, k, ns, again)
	if a, b := specJSON(t, first), specJSON(t, second); a != b {
		t.Fatalf("an injected Pod changed when sent again:\n%s\n%s", a, b)
	}
	if !maps.Equal(first.Annotations, second.Annotations) {
		t.Fatalf("annotations changed: %v, then %v", first.Annotations, second.Annotations)
	}
	// A Pod with the sidecar but no marker (the library chart's) is left
	// alone too.
	delete(again.Annotations, markerAnnotation)
	if third := mustDryRun(t, k, ns, again); specJSON(t, third) != specJSON(t, first) {
		t.Fatalf("a Pod that has the sidecar got another: %v", initNames(third))
	}
}

// TestInjectUnlabelledUnchanged: a Pod without the label (even with the
// annotations) comes back byte for byte as from a namespace no policy
// covers; a labelled Pod in kube-system or the injector's namespace is
// neither injected nor refused.
func TestInjectUnlabelledUnchanged(t *testing.T) {
	k := injector(t)
	ns := k.Namespace(t)
	pod := labelledPod("orders-0")
	delete(pod.Labels, injectLabel)
	reference := mustDryRun(t, k, "kube-system", pod)
	got := mustDryRun(t, k, ns, pod)
	if a, b := specJSON(t, reference), specJSON(t, got); a != b || len(got.Spec.InitContainers) != 0 {
		t.Fatalf("an unlabelled Pod changed:\n%s\n%s", a, b)
	}
	if !maps.Equal(got.Annotations, pod.Annotations) {
		t.Fatalf("annotations %v, want %v", got.Annotations, pod.Annotations)
	}
	for _, excluded := range []string{"kube-system", injectorNamespace} {
		if got := mustDryRun(t, k, excluded, labelledPod("orders-0")); len(got.Spec.InitContainers) != 0 {
			t.Fatalf("a labelled Pod in %s was injected", excluded)
		}
	}
}

// TestInjectNamespaceSettings: a namespace labelled
// leader-sidecar.io/settings=namespace uses its own parameter ConfigMap.
func TestInjectNamespaceSettings(t *testing.T) {
	k := injector(t)
	ns := k.Namespace(t)
	data := paramData(t)
	data["logLevel"] = "debug"
	useNamespaceParam(t, k, ns, data)
	got := awaitDryRun(t, k, ns, labelledPod("orders-0"), func(p *corev1.Pod, err error) bool {
		return err == nil && len(p.Spec.InitContainers) > 0 &&
			sidecartest.EnvOf(&p.Spec.InitContainers[0])["LEADER_SIDECAR_LOG_LEVEL"].Value == "debug"
	})
	if names := initNames(got); !slices.Equal(names, []string{sidecarName}) {
		t.Fatalf("init containers %v", names)
	}
}

// TestInjectPodSecurityRestricted: an injected Pod passes Pod Security
// "restricted" (which admission checks after the mutation), its app
// container being restricted too.
func TestInjectPodSecurityRestricted(t *testing.T) {
	k := injector(t)
	ns := k.Namespace(t)
	nsObj, err := k.Client.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	nsObj.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	if _, err := k.Client.CoreV1().Namespaces().Update(t.Context(), nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := labelledPod("orders-0")
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if got := mustDryRun(t, k, ns, pod); sidecartest.ContainerNamed(got.Spec.InitContainers, sidecarName) == nil {
		t.Fatalf("not injected: %v", initNames(got))
	}
	// The check is on: the app container alone, unrestricted, is refused.
	pod.Spec.Containers[0].SecurityContext = nil
	if _, err := dryRun(t.Context(), k, ns, pod); err == nil || !strings.Contains(err.Error(), "restricted") {
		t.Fatalf("an unrestricted app container passed Pod Security restricted: %v", err)
	}
}
