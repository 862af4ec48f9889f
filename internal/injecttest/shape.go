// Package injecttest holds the checks of what admission makes of a Pod
// with charts/leader-sidecar-injector installed, written once and run on
// two API servers: the envtest kube-apiserver of e2e/inject and the
// one-node cluster of e2e/cluster (where the ServiceAccount plugin, Pod
// Security and the real ServiceAccounts take part too). Each check sends
// Pods through an [Admit] (a server-side dry run) and judges the answers;
// it is for tests only.
//
// The Pods it sends run as the ServiceAccount [ServiceAccount] with
// automountServiceAccountToken false and meet Pod Security "restricted",
// so every namespace a check uses must have that ServiceAccount where the
// ServiceAccount plugin runs.
package injecttest

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const (
	InjectLabel      = "leader-sidecar.io/inject"
	MarkerAnnotation = "leader-sidecar.io/injected"
	LeaseAnnotation  = "leader-sidecar.io/lease"
	SidecarName      = "leader-sidecar"
	// ServiceAccount is the ServiceAccount the Pods run as.
	ServiceAccount = "orders"
	// TokenPath is where a container finds a ServiceAccount token.
	TokenPath = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// Admit sends pod to the API server in namespace ns, as a server-side dry
// run, and returns what admission made of it.
type Admit func(ctx context.Context, ns string, pod *corev1.Pod) (*corev1.Pod, error)

// DryRun is the Admit of client: a server-side dry run of the Pod.
func DryRun(client kubernetes.Interface) Admit {
	return func(ctx context.Context, ns string, pod *corev1.Pod) (*corev1.Pod, error) {
		return client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	}
}

// Where is where the checks send their Pods: Namespace is covered by the
// injector; Excluded are namespaces it never injects (kube-system, its
// own), the first of which serves as the reference of an untouched Pod.
type Where struct {
	Admit     Admit
	Namespace string
	Excluded  []string
}

// MustAdmit is Admit that fails t on a refusal.
func (w Where) MustAdmit(t testing.TB, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := w.Admit(context.Background(), ns, pod)
	if err != nil {
		t.Fatalf("the API server refused Pod %s in %s: %v", pod.Name+pod.GenerateName, ns, err)
	}
	return got
}

// LabelledPod is a Pod that opts in, naming its Lease "orders", with one
// app container.
func LabelledPod(name string) *corev1.Pod {
	p := PlainPod(name)
	p.Labels = map[string]string{InjectLabel: "true"}
	p.Annotations = map[string]string{LeaseAnnotation: "orders"}
	return p
}

// PlainPod is a Pod with one app container, restricted, and nothing else.
func PlainPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			ServiceAccountName:           ServiceAccount,
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{RestrictedContainer("app", "registry.example/app:1")},
		},
	}
}

// RestrictedContainer is a container as Pod Security "restricted" wants
// it in a Pod with PlainPod's security context.
func RestrictedContainer(name, image string) corev1.Container {
	return corev1.Container{Name: name, Image: image, SecurityContext: &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}}
}

// InitNames is the names of the Pod's init containers, in order.
func InitNames(p *corev1.Pod) []string {
	var names []string
	if p == nil {
		return nil
	}
	for _, c := range p.Spec.InitContainers {
		names = append(names, c.Name)
	}
	return names
}

// SpecJSON is the Pod's spec as JSON, to compare byte for byte.
func SpecJSON(t testing.TB, p *corev1.Pod) string {
	t.Helper()
	b, err := json.Marshal(p.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ContainerNamed is the container of cs called name, or nil.
func ContainerNamed(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// TokenMounts is the names of the volumes c mounts where a container finds
// a ServiceAccount token.
func TokenMounts(c corev1.Container) []string {
	var vols []string
	for _, m := range c.VolumeMounts {
		if m.MountPath == TokenPath {
			vols = append(vols, m.Name)
		}
	}
	return vols
}

// LabelledPodShape: a labelled Pod with init containers, volumes and
// annotations of its own gets the sidecar first among its init containers,
// a native sidecar (restartPolicy Always) with the Lease of its
// annotation and POD_NAME from the Downward API, its token volume (mounted
// by the sidecar alone) after the Pod's own volumes, and the marker
// annotation beside the Pod's own; its own init containers stay in order
// and untouched.
func LabelledPodShape(t *testing.T, w Where) {
	pod := LabelledPod("orders-0")
	pod.Spec.InitContainers = []corev1.Container{
		RestrictedContainer("migrate", "registry.example/migrate:1"),
		RestrictedContainer("warm", "registry.example/warm:1"),
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Annotations["team"] = "shop"
	got := w.MustAdmit(t, w.Namespace, pod)

	if names := InitNames(got); !slices.Equal(names, []string{SidecarName, "migrate", "warm"}) {
		t.Fatalf("init containers %v, want the sidecar first, then the Pod's own in order", names)
	}
	sc := got.Spec.InitContainers[0]
	if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("the sidecar's restartPolicy is %v, want Always (a native sidecar)", sc.RestartPolicy)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range sc.Env {
		env[e.Name] = e
	}
	if v := env["LEADER_SIDECAR_LEASE_NAME"].Value; v != "orders" {
		t.Fatalf("LEADER_SIDECAR_LEASE_NAME=%q, want the annotation's orders", v)
	}
	if f := env["POD_NAME"].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "metadata.name" {
		t.Fatalf("POD_NAME is not the Downward API's metadata.name: %+v", env["POD_NAME"])
	}
	if got.Annotations[MarkerAnnotation] != "true" || got.Annotations["team"] != "shop" || got.Annotations[LeaseAnnotation] != "orders" {
		t.Fatalf("annotations %v, want the Pod's own and %s=true", got.Annotations, MarkerAnnotation)
	}
	var vols []string
	for _, v := range got.Spec.Volumes {
		vols = append(vols, v.Name)
	}
	if !slices.Equal(vols, []string{"data", "leader-sidecar-token"}) {
		t.Fatalf("volumes %v, want the Pod's own, then the sidecar's token", vols)
	}
	if m := TokenMounts(sc); !slices.Equal(m, []string{"leader-sidecar-token"}) {
		t.Fatalf("the sidecar mounts %v at %s, want its own token alone", m, TokenPath)
	}
	// The token is mounted in the sidecar only.
	if app := got.Spec.Containers[0]; len(app.VolumeMounts) != 0 {
		t.Fatalf("the app container mounts %v", app.VolumeMounts)
	}
	for i, c := range got.Spec.InitContainers[1:] {
		if len(c.VolumeMounts) != 0 || len(c.Env) != 0 || c.Image != pod.Spec.InitContainers[i].Image {
			t.Fatalf("init container %s changed: %+v", c.Name, c)
		}
	}
}

// BarePodShape: a Pod with no init containers, volumes, annotations or
// readiness gates, named from generateName, its Lease named by its
// app.kubernetes.io/name label, is injected, every list and map created;
// in pod-condition mode (which adds a readiness gate) too.
func BarePodShape(t *testing.T, w Where) {
	pod := PlainPod("")
	pod.GenerateName = "orders-"
	pod.Labels = map[string]string{InjectLabel: "true", "app.kubernetes.io/name": "orders"}
	got := w.MustAdmit(t, w.Namespace, pod)
	if names := InitNames(got); !slices.Equal(names, []string{SidecarName}) {
		t.Fatalf("init containers %v, want the sidecar alone", names)
	}
	if !strings.HasPrefix(got.Name, "orders-") {
		t.Fatalf("name %q, want one made from generateName orders-", got.Name)
	}
	lease := ""
	for _, e := range got.Spec.InitContainers[0].Env {
		if e.Name == "LEADER_SIDECAR_LEASE_NAME" {
			lease = e.Value
		}
	}
	if lease != "orders" {
		t.Fatalf("LEADER_SIDECAR_LEASE_NAME=%q, want the label's orders", lease)
	}
	if len(got.Spec.Volumes) != 1 || got.Annotations[MarkerAnnotation] != "true" {
		t.Fatalf("volumes %v annotations %v", got.Spec.Volumes, got.Annotations)
	}

	pod.Annotations = map[string]string{"leader-sidecar.io/readiness": "pod-condition"}
	got = w.MustAdmit(t, w.Namespace, pod)
	if g := got.Spec.ReadinessGates; len(g) != 1 || g[0].ConditionType != "leader-sidecar.io/leader" {
		t.Fatalf("readiness gates %v, want leader-sidecar.io/leader", g)
	}
}

// AlreadyInjectedUnchanged sends an injected Pod again: the "not yet
// injected" match condition holds it back, so it comes back as it went,
// with one sidecar; so does a Pod that has the sidecar but not the marker
// (the library chart's).
func AlreadyInjectedUnchanged(t *testing.T, w Where) {
	first := w.MustAdmit(t, w.Namespace, LabelledPod("orders-0"))
	again := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: first.Name, Labels: first.Labels, Annotations: first.Annotations},
		Spec:       first.Spec,
	}
	second := w.MustAdmit(t, w.Namespace, again)
	if a, b := SpecJSON(t, first), SpecJSON(t, second); a != b {
		t.Fatalf("an injected Pod changed when sent again:\n%s\n%s", a, b)
	}
	if !maps.Equal(first.Annotations, second.Annotations) {
		t.Fatalf("annotations changed: %v, then %v", first.Annotations, second.Annotations)
	}
	delete(again.Annotations, MarkerAnnotation)
	if third := w.MustAdmit(t, w.Namespace, again); SpecJSON(t, third) != SpecJSON(t, first) {
		t.Fatalf("a Pod that has the sidecar got another: %v", InitNames(third))
	}
}

// UnlabelledUnchanged: a Pod without the label (even with the
// annotations) comes back byte for byte as from a namespace no policy
// covers; a labelled Pod in an excluded namespace is neither injected nor
// refused.
func UnlabelledUnchanged(t *testing.T, w Where) {
	pod := LabelledPod("orders-0")
	delete(pod.Labels, InjectLabel)
	reference := w.MustAdmit(t, w.Excluded[0], pod)
	got := w.MustAdmit(t, w.Namespace, pod)
	if a, b := SpecJSON(t, reference), SpecJSON(t, got); a != b || len(got.Spec.InitContainers) != 0 {
		t.Fatalf("an unlabelled Pod changed:\n%s\n%s", a, b)
	}
	if !maps.Equal(got.Annotations, pod.Annotations) || !maps.Equal(got.Labels, pod.Labels) {
		t.Fatalf("labels %v annotations %v, want %v %v", got.Labels, got.Annotations, pod.Labels, pod.Annotations)
	}
	for _, excluded := range w.Excluded {
		if got := w.MustAdmit(t, excluded, LabelledPod("orders-0")); len(got.Spec.InitContainers) != 0 {
			t.Fatalf("a labelled Pod in %s was injected", excluded)
		}
	}
}

// Shapes are the checks above by name, for a t.Run per check.
var Shapes = []struct {
	Name  string
	Check func(*testing.T, Where)
}{
	{"labelled", LabelledPodShape},
	{"bare-generateName", BarePodShape},
	{"already-injected", AlreadyInjectedUnchanged},
	{"unlabelled", UnlabelledUnchanged},
}
