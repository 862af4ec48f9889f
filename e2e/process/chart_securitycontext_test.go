package process

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The sidecar's user and group: 65532 by default, another number, or none
// at all (null), which platforms that assign UIDs need (OpenShift's
// restricted-v2 refuses a fixed one); and its exit message in the Pod's
// status (terminationMessagePolicy FallbackToLogsOnError).

// podIDs is every uid, gid and fsGroup the Pod spec sets, by where.
func podIDs(pod corev1.PodSpec) map[string]int64 {
	ids := map[string]int64{}
	if sc := pod.SecurityContext; sc != nil {
		for name, v := range map[string]*int64{"pod runAsUser": sc.RunAsUser, "pod runAsGroup": sc.RunAsGroup, "pod fsGroup": sc.FSGroup} {
			if v != nil {
				ids[name] = *v
			}
		}
	}
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		if sc := c.SecurityContext; sc != nil {
			for name, v := range map[string]*int64{"runAsUser": sc.RunAsUser, "runAsGroup": sc.RunAsGroup} {
				if v != nil {
					ids[c.Name+" "+name] = *v
				}
			}
		}
	}
	return ids
}

func sidecarOf(t *testing.T, pod corev1.PodSpec) *corev1.Container {
	t.Helper()
	sc := sidecartest.ContainerNamed(slices.Concat(pod.InitContainers, pod.Containers), "leader-sidecar")
	if sc == nil {
		t.Fatal("no sidecar container")
	}
	return sc
}

func TestChartSidecarSecurityContext(t *testing.T) {
	dir := sidecartest.Charts(t)
	example := func(t *testing.T, values string) corev1.PodSpec {
		t.Helper()
		return sidecartest.One[*appsv1.Deployment](t, sidecartest.RenderChart(t, dir, "apps", values)).Spec.Template.Spec
	}
	mychart := sidecartest.HelmCreateWithLibrary(t)
	helmCreate := func(t *testing.T, set ...string) corev1.PodSpec {
		t.Helper()
		r, err := sidecartest.TemplateMyChart(t, mychart, set...)
		if err != nil {
			t.Fatal(err)
		}
		return sidecartest.One[*appsv1.Deployment](t, r).Spec.Template.Spec
	}

	t.Run("defaults", func(t *testing.T) {
		for name, pod := range map[string]corev1.PodSpec{"example": example(t, ""), "helm create": helmCreate(t)} {
			sc := sidecarOf(t, pod)
			ids := podIDs(pod)
			if ids["leader-sidecar runAsUser"] != 65532 || ids["leader-sidecar runAsGroup"] != 65532 {
				t.Errorf("%s: sidecar ids %v, want 65532", name, ids)
			}
			if sc.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
				t.Errorf("%s: terminationMessagePolicy %q, want FallbackToLogsOnError", name, sc.TerminationMessagePolicy)
			}
		}
		if ids := podIDs(example(t, "")); ids["pod fsGroup"] != 65532 || ids["app runAsUser"] != 65532 {
			t.Errorf("example: ids %v, want 65532 for the Pod and the app", ids)
		}
	})
	t.Run("other ids", func(t *testing.T) {
		pod := example(t, "sidecar:\n  securityContext:\n    runAsUser: 1000650000\n    runAsGroup: 0\n    fsGroup: 1000650000\n")
		ids := podIDs(pod)
		for where, want := range map[string]int64{"leader-sidecar runAsUser": 1000650000, "leader-sidecar runAsGroup": 0, "app runAsUser": 1000650000, "pod fsGroup": 1000650000} {
			if got, ok := ids[where]; !ok || got != want {
				t.Errorf("%s: %d (set %t), want %d", where, got, ok, want)
			}
		}
	})
	t.Run("none: the platform assigns them", func(t *testing.T) {
		none := "sidecar:\n  securityContext:\n    runAsUser: null\n    runAsGroup: null\n    fsGroup: null\n"
		for name, pod := range map[string]corev1.PodSpec{
			"example, values file": example(t, none),
			"helm create, --set":   helmCreate(t, "sidecar.securityContext.runAsUser=null", "sidecar.securityContext.runAsGroup=null"),
		} {
			if ids := podIDs(pod); len(ids) != 0 {
				t.Errorf("%s: ids %v, want none", name, ids)
			}
			if sc := sidecarOf(t, pod).SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s: the rest of the sidecar's securityContext went too: %+v", name, sc)
			}
		}
	})
	t.Run("bad values", func(t *testing.T) {
		if _, err := sidecartest.TemplateMyChart(t, mychart, "sidecar.securityContext.runAsUser=root"); err == nil ||
			!strings.Contains(err.Error(), `sidecar.securityContext.runAsUser must be a uid (a whole number from 0) or null, not "root"`) {
			t.Errorf("runAsUser root: %v", err)
		}
		if _, err := sidecartest.TemplateMyChart(t, mychart, "sidecar.securityContext.runAsGroup=-1"); err == nil ||
			!strings.Contains(err.Error(), `sidecar.securityContext.runAsGroup must be a gid (a whole number from 0) or null, not -1`) {
			t.Errorf("runAsGroup -1: %v", err)
		}
		if _, err := sidecartest.TemplateChart(t, dir, "apps", "sidecar:\n  securityContext:\n    runAsUser: root\n"); err == nil ||
			!strings.Contains(err.Error(), "/sidecar/securityContext/runAsUser") {
			t.Errorf("the example's schema let runAsUser root through: %v", err)
		}
	})
}
