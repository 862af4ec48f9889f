package inject

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The injected sidecar is the library chart's: for the same settings, the
// sidecar container, its volumes and its readiness gate, as the API
// server admits them, agree field by field whether the library chart
// rendered them (the example chart's Pod template) or the injector added
// them (a labelled Pod with annotations).

// agreementCase is one set of settings, as the library's values (under
// sidecar:) and as the Pod's annotations.
type agreementCase struct {
	name        string
	values      string // YAML under sidecar:, besides native and leaseName
	annotations map[string]string
}

func agreementCases() []agreementCase {
	var cases []agreementCase
	for _, mode := range []string{"none", "probe", "pod-condition", "label"} {
		for _, backend := range []string{"lease", "sqlite"} {
			cases = append(cases, agreementCase{
				name:   mode + "/" + backend,
				values: fmt.Sprintf("backend: %s\nreadiness:\n  mode: %s\n", backend, mode),
				annotations: map[string]string{
					"leader-sidecar.io/backend": backend, "leader-sidecar.io/readiness": mode,
				},
			})
		}
	}
	return append(cases,
		agreementCase{
			name:        "wait-for-leadership",
			values:      "waitForLeadership: true\n",
			annotations: map[string]string{"leader-sidecar.io/wait-for-leadership": "true"},
		},
		agreementCase{
			name: "timings/app-health/events-off/deletion-cost-off",
			values: "leaseDuration: 30s\nrenewDeadline: 20s\nretryPeriod: 4s\nrenewInterval: 8s\nmaxRecordLeaseDuration: 1m\nawaitReplacement: 45s\n" +
				"appHealth:\n  url: http://127.0.0.1:8080/healthz\n  period: 5s\n  failures: 2\n  timeout: 3s\n" +
				"events: false\npodDeletionCost: false\nlogLevel: debug\nlogFormat: text\n",
			annotations: map[string]string{
				"leader-sidecar.io/lease-duration": "30s", "leader-sidecar.io/renew-deadline": "20s",
				"leader-sidecar.io/retry-period": "4s", "leader-sidecar.io/renew-interval": "8s", "leader-sidecar.io/max-record-lease-duration": "1m",
				"leader-sidecar.io/await-replacement": "45s",
				"leader-sidecar.io/app-health-url":    "http://127.0.0.1:8080/healthz",
				"leader-sidecar.io/app-health-period": "5s", "leader-sidecar.io/app-health-failures": "2",
				"leader-sidecar.io/app-health-timeout": "3s",
				"leader-sidecar.io/events":             "false", "leader-sidecar.io/log-level": "debug",
				"leader-sidecar.io/log-format": "text", "leader-sidecar.io/pod-deletion-cost": "false",
			},
		},
	)
}

func TestInjectAgreesWithLibraryChart(t *testing.T) {
	k := injector(t)
	dir := sidecartest.Charts(t)
	for _, c := range agreementCases() {
		t.Run(c.name, func(t *testing.T) {
			ns := preparedNamespace(t, k)
			values := "sidecar:\n  native: true\n  leaseName: orders\n  " +
				strings.ReplaceAll(strings.TrimSpace(c.values), "\n", "\n  ") + "\n"
			dep := sidecartest.One[*appsv1.Deployment](t, sidecartest.RenderChart(t, dir, ns, values))
			fromLibrary := mustDryRun(t, k, ns, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "from-library", Labels: dep.Spec.Template.Labels},
				Spec:       dep.Spec.Template.Spec,
			})

			pod := labelledPod("injected")
			maps.Copy(pod.Annotations, c.annotations)
			injected := mustDryRun(t, k, ns, pod)

			want, got := sidecarParts(t, fromLibrary), sidecarParts(t, injected)
			if diffs := diffJSON("", want, got); len(diffs) > 0 {
				t.Fatalf("the injected sidecar differs from the library chart's (library, then injected):\n  %s",
					strings.Join(diffs, "\n  "))
			}
		})
	}
}

// sidecarParts is what the sidecar brings to a Pod, as JSON values: its
// container, its volumes and the Pod's readiness gates.
func sidecarParts(t *testing.T, p *corev1.Pod) map[string]any {
	t.Helper()
	c := sidecartest.ContainerNamed(p.Spec.InitContainers, sidecarName)
	if c == nil {
		t.Fatalf("Pod %s has no %s init container: %v", p.Name, sidecarName, initNames(p))
	}
	var vols []corev1.Volume
	for _, v := range p.Spec.Volumes {
		if strings.HasPrefix(v.Name, "leader-sidecar-") {
			vols = append(vols, v)
		}
	}
	return map[string]any{"container": asJSON(t, c), "volumes": asJSON(t, vols), "readinessGates": asJSON(t, p.Spec.ReadinessGates)}
}

func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// diffJSON lists the paths where two JSON values differ, with both values.
func diffJSON(path string, a, b any) []string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		var diffs []string
		keys := slices.Sorted(maps.Keys(av))
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			diffs = append(diffs, diffJSON(path+"."+k, av[k], bv[k])...)
		}
		return diffs
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			break
		}
		var diffs []string
		for i := range av {
			diffs = append(diffs, diffJSON(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i])...)
		}
		return diffs
	}
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	if string(ab) == string(bb) {
		return nil
	}
	return []string{fmt.Sprintf("%s: %s, then %s", path, ab, bb)}
}
