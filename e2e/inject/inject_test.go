package inject

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/injecttest"
	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The shape of what admission makes of a Pod, by server-side dry run on
// the API server with the injector installed.

// where is where the shape checks of internal/injecttest send their Pods
// on the shared API server: a namespace of the test's own; kube-system and
// the injector's namespace are excluded.
func where(t *testing.T) injecttest.Where {
	k := injector(t)
	return injecttest.Where{Admit: injecttest.DryRun(k.Client), Namespace: preparedNamespace(t, k),
		Excluded: []string{"kube-system", injectorNamespace}}
}

func TestInjectLabelledPod(t *testing.T) { injecttest.LabelledPodShape(t, where(t)) }

func TestInjectBarePod(t *testing.T) { injecttest.BarePodShape(t, where(t)) }

func TestInjectAlreadyInjectedUnchanged(t *testing.T) {
	injecttest.AlreadyInjectedUnchanged(t, where(t))
}

func TestInjectUnlabelledUnchanged(t *testing.T) { injecttest.UnlabelledUnchanged(t, where(t)) }

// TestInjectNamespaceSettings: a namespace labelled
// leader-sidecar.io/settings=namespace uses its own parameter ConfigMap.
func TestInjectNamespaceSettings(t *testing.T) {
	k := injector(t)
	ns := preparedNamespace(t, k)
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
	ns := preparedNamespace(t, k)
	nsObj, err := k.Client.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	nsObj.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	if _, err := k.Client.CoreV1().Namespaces().Update(t.Context(), nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := labelledPod("orders-0") // restricted, as all of injecttest's Pods
	if got := mustDryRun(t, k, ns, pod); sidecartest.ContainerNamed(got.Spec.InitContainers, sidecarName) == nil {
		t.Fatalf("not injected: %v", initNames(got))
	}
	// The check is on: the app container alone, unrestricted, is refused.
	pod.Spec.Containers[0].SecurityContext = nil
	if _, err := dryRun(t.Context(), k, ns, pod); err == nil || !strings.Contains(err.Error(), "restricted") {
		t.Fatalf("an unrestricted app container passed Pod Security restricted: %v", err)
	}
}
