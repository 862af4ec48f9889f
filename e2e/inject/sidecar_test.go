package inject

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// A Pod that already runs the sidecar, under any container name (the
// library chart's sidecar.name), as a native sidecar or a plain
// container, is not given a second one (two would both bind the app API
// and ops ports), and is admitted.
func TestInjectSeesASidecarUnderAnotherName(t *testing.T) {
	k := injector(t)
	dir := sidecartest.Charts(t)
	for _, c := range []struct{ name, values string }{
		{"native", "native: true"},
		{"plain container", "native: false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := preparedNamespace(t, k)
			values := "sidecar:\n  name: election\n  leaseName: orders\n  " + c.values + "\n"
			dep := sidecartest.One[*appsv1.Deployment](t, sidecartest.RenderChart(t, dir, ns, values))
			labels := map[string]string{injectLabel: "true"}
			for k, v := range dep.Spec.Template.Labels {
				labels[k] = v
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orders-0", Labels: labels}, Spec: dep.Spec.Template.Spec}
			wantInit, wantApp := containerNames(pod.Spec.InitContainers), containerNames(pod.Spec.Containers)
			got := mustDryRun(t, k, ns, pod)
			if gotInit, gotApp := containerNames(got.Spec.InitContainers), containerNames(got.Spec.Containers); !slices.Equal(gotInit, wantInit) || !slices.Equal(gotApp, wantApp) {
				t.Fatalf("init containers %v and containers %v, want them unchanged: %v and %v", gotInit, gotApp, wantInit, wantApp)
			}
			if _, marked := got.Annotations[markerAnnotation]; marked {
				t.Errorf("annotated %s=%s, though nothing was injected", markerAnnotation, got.Annotations[markerAnnotation])
			}
		})
	}
}

// containerNames is the names of cs, in order.
func containerNames(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
