package chart

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The optional objects and Pod settings of the library, off by default, as
// the example chart exposes them and as a helm create chart with the
// library gets them: PodDisruptionBudget, ServiceMonitor (with its metrics
// Service), PodMonitor; priorityClassName, topologySpreadConstraints,
// imagePullSecrets. Rendered, and with every one on, accepted by a real
// API server.

// podSettings are the example chart's optional Pod settings of every kind,
// as a values file.
const podSettings = `priorityClassName: leaders
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: DoNotSchedule
    labelSelector:
      matchLabels:
        tier: mine
imagePullSecrets:
  - mirror-credentials
  - name: other
`

// TestChartExtrasOffByDefault: the example chart and a helm create chart
// with the library render none of the optional objects or Pod settings.
func TestChartExtrasOffByDefault(t *testing.T) {
	r, monitors := sidecartest.ExampleExtras(t, sidecartest.Charts(t), "{}\n")
	lib, err := sidecartest.TemplateMyChart(t, sidecartest.HelmCreateWithExtras(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*sidecartest.Rendered{"example": r, "helm create": lib} {
		if pdbs := sidecartest.Find[*policyv1.PodDisruptionBudget](t, r); len(pdbs) != 0 {
			t.Errorf("%s: a PodDisruptionBudget by default", name)
		}
		pod := sidecartest.One[*appsv1.Deployment](t, r).Spec.Template.Spec
		if pod.PriorityClassName != "" || len(pod.TopologySpreadConstraints) != 0 || len(pod.ImagePullSecrets) != 0 {
			t.Errorf("%s: Pod settings by default: %q %v %v", name, pod.PriorityClassName, pod.TopologySpreadConstraints, pod.ImagePullSecrets)
		}
		for _, s := range sidecartest.Find[*corev1.Service](t, r) {
			if strings.HasSuffix(s.Name, "-metrics") {
				t.Errorf("%s: a metrics Service by default", name)
			}
		}
	}
	if len(monitors) != 0 {
		t.Errorf("monitors by default: %d", len(monitors))
	}
}

func TestChartPodDisruptionBudget(t *testing.T) {
	dir := sidecartest.Charts(t)
	for _, c := range []struct {
		name, values string
		min, max     string // "" when absent
	}{
		{"neither given: one at a time", "podDisruptionBudget:\n  enabled: true\n", "", "1"},
		{"minAvailable", "podDisruptionBudget:\n  enabled: true\n  minAvailable: 2\n", "2", ""},
		{"maxUnavailable as a percentage", "podDisruptionBudget:\n  enabled: true\n  maxUnavailable: 50%\n", "", "50%"},
		{"maxUnavailable 0 is kept", "podDisruptionBudget:\n  enabled: true\n  maxUnavailable: 0\n", "", "0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := sidecartest.ExampleExtras(t, dir, c.values)
			pdb := sidecartest.One[*policyv1.PodDisruptionBudget](t, r)
			var min, max string
			if pdb.Spec.MinAvailable != nil {
				min = pdb.Spec.MinAvailable.String()
			}
			if pdb.Spec.MaxUnavailable != nil {
				max = pdb.Spec.MaxUnavailable.String()
			}
			if min != c.min || max != c.max {
				t.Fatalf("minAvailable %q maxUnavailable %q, want %q and %q", min, max, c.min, c.max)
			}
			dep := sidecartest.One[*appsv1.Deployment](t, r)
			if !maps.Equal(pdb.Spec.Selector.MatchLabels, dep.Spec.Selector.MatchLabels) || len(pdb.Spec.Selector.MatchExpressions) != 0 {
				t.Fatalf("the budget selects %v, the Deployment %v", pdb.Spec.Selector, dep.Spec.Selector.MatchLabels)
			}
		})
	}
	chart := sidecartest.HelmCreateWithExtras(t)
	r, err := sidecartest.TemplateMyChart(t, chart, "podDisruptionBudget.enabled=true", "podDisruptionBudget.minAvailable=1")
	if err != nil {
		t.Fatal(err)
	}
	if pdb := sidecartest.One[*policyv1.PodDisruptionBudget](t, r); pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Name != "shop-mychart" {
		t.Fatalf("helm create chart: %+v", pdb.Spec)
	}
	for _, bad := range []struct{ set, want string }{
		{"podDisruptionBudget.maxUnavailable=1", "podDisruptionBudget.minAvailable (1) and podDisruptionBudget.maxUnavailable (1) are both set"},
		{"podDisruptionBudget.minAvailable=half", "podDisruptionBudget.minAvailable must be a number of Pods or a percentage"},
	} {
		args := []string{"podDisruptionBudget.enabled=true", bad.set}
		if !strings.Contains(bad.set, "minAvailable") {
			args = append(args, "podDisruptionBudget.minAvailable=1")
		}
		if _, err := sidecartest.TemplateMyChart(t, chart, args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("--set %v: %v, want an error with %q", args, err, bad.want)
		}
	}
}

func TestChartMonitors(t *testing.T) {
	dir := sidecartest.Charts(t)
	t.Run("ServiceMonitor", func(t *testing.T) {
		r, monitors := sidecartest.ExampleExtras(t, dir, "serviceMonitor:\n  enabled: true\n  interval: 15s\n  labels:\n    release: prometheus\nsidecar:\n  opsPort: 9090\n")
		if len(monitors) != 1 || monitors[0].GetKind() != "ServiceMonitor" {
			t.Fatalf("monitors %v, want one ServiceMonitor", monitors)
		}
		sm := monitors[0]
		if sm.GetLabels()["release"] != "prometheus" {
			t.Fatalf("the ServiceMonitor's labels %v lack release: prometheus", sm.GetLabels())
		}
		dep := sidecartest.One[*appsv1.Deployment](t, r)
		var metrics *corev1.Service
		for _, s := range sidecartest.Find[*corev1.Service](t, r) {
			if s.Name == "demo-leader-sidecar-example-metrics" {
				metrics = s
			}
		}
		if metrics == nil {
			t.Fatal("no metrics Service")
		}
		if metrics.Spec.ClusterIP != "None" || !metrics.Spec.PublishNotReadyAddresses ||
			!maps.Equal(metrics.Spec.Selector, dep.Spec.Selector.MatchLabels) ||
			len(metrics.Spec.Ports) != 1 || metrics.Spec.Ports[0].Port != 9090 || metrics.Spec.Ports[0].TargetPort.String() != "ops" {
			t.Fatalf("metrics Service spec %+v: want headless, not-ready addresses published, every Pod, port 9090 to ops", metrics.Spec)
		}
		// The ServiceMonitor selects the metrics Service and no other.
		sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		for _, s := range sidecartest.Find[*corev1.Service](t, r) {
			if matches(sel, s.Labels) != (s == metrics) {
				t.Fatalf("the ServiceMonitor's selector %v and Service %s's labels %v", sel, s.Name, s.Labels)
			}
		}
		checkScrapeEndpoint(t, sm, "endpoints", "15s")
		checkOpsPort(t, dep, 9090)
	})
	t.Run("PodMonitor", func(t *testing.T) {
		r, monitors := sidecartest.ExampleExtras(t, dir, "podMonitor:\n  enabled: true\n")
		if len(monitors) != 1 || monitors[0].GetKind() != "PodMonitor" {
			t.Fatalf("monitors %v, want one PodMonitor", monitors)
		}
		dep := sidecartest.One[*appsv1.Deployment](t, r)
		sel, _, _ := unstructured.NestedStringMap(monitors[0].Object, "spec", "selector", "matchLabels")
		if len(sel) == 0 || !matches(sel, dep.Spec.Template.Labels) {
			t.Fatalf("the PodMonitor selects %v, the Pods are labelled %v", sel, dep.Spec.Template.Labels)
		}
		checkScrapeEndpoint(t, monitors[0], "podMetricsEndpoints", "")
		checkOpsPort(t, dep, 8081)
		for _, s := range sidecartest.Find[*corev1.Service](t, r) {
			if strings.HasSuffix(s.Name, "-metrics") {
				t.Fatal("a PodMonitor needs no metrics Service")
			}
		}
	})
	t.Run("refused", func(t *testing.T) {
		chart := sidecartest.HelmCreateWithExtras(t)
		for _, c := range []struct {
			set  []string
			want string
		}{
			{[]string{"serviceMonitor.enabled=true", "podMonitor.enabled=true"}, "serviceMonitor.enabled and podMonitor.enabled are both true"},
			{[]string{"podMonitor.enabled=true", "podMonitor.interval=15"}, "podMonitor.interval must be a Prometheus duration"},
		} {
			if _, err := sidecartest.TemplateMyChart(t, chart, c.set...); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("--set %v: %v, want an error with %q", c.set, err, c.want)
			}
		}
	})
}

func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkScrapeEndpoint: the monitor's one endpoint is /metrics on the port
// named ops, with interval.
func checkScrapeEndpoint(t *testing.T, m *unstructured.Unstructured, field, interval string) {
	t.Helper()
	eps, _, _ := unstructured.NestedSlice(m.Object, "spec", field)
	if len(eps) != 1 {
		t.Fatalf("%s: spec.%s %v, want one", m.GetKind(), field, eps)
	}
	ep := eps[0].(map[string]any)
	got, _ := ep["interval"].(string)
	if ep["port"] != "ops" || ep["path"] != "/metrics" || got != interval {
		t.Fatalf("%s endpoint %v, want port ops, path /metrics, interval %q", m.GetKind(), ep, interval)
	}
	if m.GetAPIVersion() != sidecartest.MonitoringAPI {
		t.Fatalf("%s apiVersion %s", m.GetKind(), m.GetAPIVersion())
	}
}

// checkOpsPort: the sidecar container has the port named ops the monitors
// scrape, on opsPort.
func checkOpsPort(t *testing.T, dep *appsv1.Deployment, port int32) {
	t.Helper()
	sc := sidecartest.ContainerNamed(dep.Spec.Template.Spec.InitContainers, "leader-sidecar")
	if sc == nil || !slices.ContainsFunc(sc.Ports, func(p corev1.ContainerPort) bool { return p.Name == "ops" && p.ContainerPort == port }) {
		t.Fatalf("the sidecar has no port ops on %d: %+v", port, sc)
	}
}

// TestChartPodSettings: the Pod settings as the example chart and a helm
// create chart render them.
func TestChartPodSettings(t *testing.T) {
	values := podSettings
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

// The example chart with every optional Pod setting (podSettings, which
// TestChartPodSettings checks as rendered), a PodDisruptionBudget and a
// ServiceMonitor is accepted by a real API server: every object but the
// ServiceMonitor, whose CRD envtest lacks, in a server-side dry run.
func TestChartPodSettingsAcceptedByTheAPIServer(t *testing.T) {
	values := podSettings
	dir := sidecartest.Charts(t)
	k := sidecartest.Kube(t)
	d := newDryRunner(t, k.Config)
	ns := k.Namespace(t)
	out, err := sidecartest.TemplateChart(t, dir, ns, values+"podDisruptionBudget:\n  enabled: true\nserviceMonitor:\n  enabled: true\n")
	if err != nil {
		t.Fatal(err)
	}
	r, monitors := sidecartest.RenderWithMonitors(t, out)
	if len(monitors) != 1 {
		t.Fatalf("%d monitors", len(monitors))
	}
	// Every object but the ServiceMonitor, whose CRD envtest lacks.
	for _, o := range r.Raw {
		if err := d.create(context.Background(), o, ns, true); err != nil {
			t.Fatalf("the API server refused %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}
