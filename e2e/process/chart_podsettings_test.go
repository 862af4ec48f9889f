package process

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The library's Pod settings as the example chart and a helm create chart
// get them (priorityClassName, topologySpreadConstraints,
// imagePullSecrets), image digests, extra env and args, and native
// sidecars only from Kubernetes 1.29.

func TestChartPodSettings(t *testing.T) {
	values := sidecartest.PodSettings
	check := func(t *testing.T, r *sidecartest.Rendered) {
		t.Helper()
		dep := sidecartest.One[*appsv1.Deployment](t, r)
		pod := dep.Spec.Template.Spec
		if pod.PriorityClassName != "leaders" {
			t.Fatalf("priorityClassName %q", pod.PriorityClassName)
		}
		tsc := pod.TopologySpreadConstraints
		if len(tsc) != 2 || tsc[0].TopologyKey != "topology.kubernetes.io/zone" || tsc[0].WhenUnsatisfiable != corev1.ScheduleAnyway {
			t.Fatalf("topologySpreadConstraints %+v", tsc)
		}
		if tsc[0].LabelSelector == nil || !maps.Equal(tsc[0].LabelSelector.MatchLabels, dep.Spec.Selector.MatchLabels) {
			t.Fatalf("a constraint without a labelSelector selects %v, want the release's Pods %v", tsc[0].LabelSelector, dep.Spec.Selector.MatchLabels)
		}
		if !maps.Equal(tsc[1].LabelSelector.MatchLabels, map[string]string{"tier": "mine"}) {
			t.Fatalf("a given labelSelector was changed: %v", tsc[1].LabelSelector)
		}
		var secrets []string
		for _, s := range pod.ImagePullSecrets {
			secrets = append(secrets, s.Name)
		}
		if !slices.Equal(secrets, []string{"mirror-credentials", "other"}) {
			t.Fatalf("imagePullSecrets %q", secrets)
		}
	}
	t.Run("example", func(t *testing.T) {
		r, _ := sidecartest.ExampleExtras(t, sidecartest.Charts(t), values)
		check(t, r)
	})
	t.Run("helm create", func(t *testing.T) {
		chart := sidecartest.HelmCreateWithExtras(t)
		file := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := sidecartest.RunHelm(t, "template", "shop", chart, "--namespace", "apps", "--values", file)
		if err != nil {
			t.Fatal(err)
		}
		check(t, sidecartest.DecodeManifests(t, out))
		if _, err := sidecartest.TemplateMyChart(t, chart, "imagePullSecrets[0].nothing=x"); err == nil || !strings.Contains(err.Error(), "each of imagePullSecrets must be a Secret name or {name: ...}") {
			t.Fatalf("an imagePullSecret without a name: %v", err)
		}
	})
}

func TestChartImageDigest(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	r, _ := sidecartest.ExampleExtras(t, sidecartest.Charts(t), "sidecar:\n  image:\n    digest: "+digest+"\napp:\n  image:\n    digest: "+digest+"\n")
	images := imagesOf(sidecartest.One[*appsv1.Deployment](t, r).Spec.Template.Spec)
	if images["leader-sidecar"] != sidecarImageRepository+"@"+digest || images["app"] != appImageRepository+"@"+digest {
		t.Fatalf("images %v, want repository@%s", images, digest)
	}
	chart := sidecartest.HelmCreateWithExtras(t)
	lib, err := sidecartest.TemplateMyChart(t, chart, "sidecar.image.digest="+digest)
	if err != nil {
		t.Fatal(err)
	}
	if got := imagesOf(sidecartest.One[*appsv1.Deployment](t, lib).Spec.Template.Spec)["leader-sidecar"]; got != sidecarImageRepository+"@"+digest {
		t.Fatalf("helm create chart: sidecar image %s", got)
	}
	if _, err := sidecartest.TemplateMyChart(t, chart, "sidecar.image.digest=sha256:abc"); err == nil || !strings.Contains(err.Error(), `sidecar.image.digest must be sha256: and 64 hex digits, not "sha256:abc"`) {
		t.Fatalf("a short digest: %v", err)
	}
	if _, err := sidecartest.TemplateChart(t, sidecartest.Charts(t), "apps", "sidecar:\n  image:\n    digest: latest\n"); err == nil || !strings.Contains(err.Error(), "/sidecar/image/digest") {
		t.Fatalf("the example's schema let a bad digest through: %v", err)
	}
}

// TestChartExtraEnvAndArgs: sidecar.extraEnv and sidecar.extraArgs reach
// the sidecar container after the chart's own, native or not.
func TestChartExtraEnvAndArgs(t *testing.T) {
	dir := sidecartest.Charts(t)
	for _, native := range []bool{true, false} {
		values := "sidecar:\n  native: " + map[bool]string{true: "true", false: "false"}[native] +
			"\n  extraEnv:\n    - name: GOMEMLIMIT\n      value: 48MiB\n  extraArgs:\n    - --log-level=debug\n"
		r, _ := sidecartest.ExampleExtras(t, dir, values)
		pod := sidecartest.One[*appsv1.Deployment](t, r).Spec.Template.Spec
		sc := sidecartest.ContainerNamed(append(slices.Clone(pod.InitContainers), pod.Containers...), "leader-sidecar")
		if sc == nil {
			t.Fatal("no sidecar")
		}
		if len(sc.Args) < 2 || sc.Args[len(sc.Args)-1] != "--log-level=debug" || sc.Args[0] != "--ops-address=:8081" {
			t.Fatalf("native %t: args %q", native, sc.Args)
		}
		if e := sc.Env[len(sc.Env)-1]; e.Name != "GOMEMLIMIT" || e.Value != "48MiB" {
			t.Fatalf("native %t: the last env var is %+v", native, e)
		}
	}
}

// TestChartNativeSidecarNeedsKubernetes129: the charts install on 1.25 and
// later (kubeVersion), and a native sidecar, the default, fails the render
// below 1.29 naming sidecar.native, while native false renders there.
func TestChartNativeSidecarNeedsKubernetes129(t *testing.T) {
	for _, chart := range []string{"leader-sidecar-lib", "leader-sidecar-example"} {
		if got := readChartMeta(t, chart).KubeVersion; got != ">=1.25.0-0" {
			t.Errorf("%s: kubeVersion %q, want >=1.25.0-0", chart, got)
		}
	}
	dir := sidecartest.Charts(t)
	example := filepath.Join(dir, "leader-sidecar-example")
	mychart := sidecartest.HelmCreateWithExtras(t)
	for _, chart := range []string{example, mychart} {
		_, err := sidecartest.RunHelm(t, "template", "demo", chart, "--kube-version", "1.28.0")
		if err == nil || !strings.Contains(err.Error(), "sidecar.native true needs Kubernetes 1.29 or later") || !strings.Contains(err.Error(), "v1.28.0") {
			t.Fatalf("%s on 1.28 with a native sidecar: %v", filepath.Base(chart), err)
		}
		for _, kv := range []string{"1.25.0", "1.28.9"} {
			out, err := sidecartest.RunHelm(t, "template", "demo", chart, "--kube-version", kv, "--set", "sidecar.native=false")
			if err != nil {
				t.Fatalf("%s on %s with native false: %v", filepath.Base(chart), kv, err)
			}
			pod := sidecartest.One[*appsv1.Deployment](t, sidecartest.DecodeManifests(t, out)).Spec.Template.Spec
			if sidecartest.ContainerNamed(pod.Containers, "leader-sidecar") == nil || len(pod.InitContainers) != 0 {
				t.Fatalf("%s on %s: the sidecar is not a plain container", filepath.Base(chart), kv)
			}
		}
		if _, err := sidecartest.RunHelm(t, "template", "demo", chart, "--kube-version", "1.29.0"); err != nil {
			t.Fatalf("%s on 1.29: %v", filepath.Base(chart), err)
		}
	}
	if _, err := sidecartest.RunHelm(t, "template", "demo", example, "--kube-version", "1.24.0", "--set", "sidecar.native=false"); err == nil || !strings.Contains(err.Error(), "kubeVersion: >=1.25.0-0") {
		t.Fatalf("the example on 1.24: %v", err)
	}
}
