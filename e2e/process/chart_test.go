package process

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The charts in charts/ rendered by a pinned helm (hack/helm.sh, or $HELM),
// decoded into typed objects and checked, without an API server
// (e2e/apiserver sends them to one and applies their RBAC for real).

// sidecarEnvNames is every LEADER_SIDECAR_* variable the binary reads, from
// its --help.
func sidecarEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(sidecartest.Binary(t), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("sidecar --help: %v\n%s", err, out)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`\[env (LEADER_SIDECAR_[A-Z_]+)\]`).FindAllStringSubmatch(string(out), -1) {
		names[m[1]] = true
	}
	if len(names) < 10 {
		t.Fatalf("found only %d environment variables in --help:\n%s", len(names), out)
	}
	return names
}

// ruleKey is a PolicyRule as a comparable string.
func ruleKey(r rbacv1.PolicyRule) string {
	sorted := func(s []string) string {
		s = slices.Clone(s)
		sort.Strings(s)
		return strings.Join(s, ",")
	}
	return fmt.Sprintf("groups=[%s] resources=[%s] names=[%s] verbs=[%s] urls=[%s]",
		sorted(r.APIGroups), sorted(r.Resources), sorted(r.ResourceNames), sorted(r.Verbs), sorted(r.NonResourceURLs))
}

func ruleKeys(rules []rbacv1.PolicyRule) []string {
	var keys []string
	for _, r := range rules {
		keys = append(keys, ruleKey(r))
	}
	sort.Strings(keys)
	return keys
}

// wantRules is the least privilege of a case, exactly.
func wantRules(c sidecartest.ChartCase, lease string, leaseCreated, events bool) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	if c.Backend == "lease" {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			ResourceNames: []string{lease}, Verbs: []string{"get", "update", "watch"}})
		if !leaseCreated {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}})
		}
		if events {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}})
		}
	}
	switch c.Mode {
	case "pod-condition":
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}})
	case "label":
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}})
	}
	return rules
}

func TestChartLint(t *testing.T) {
	dir := sidecartest.Charts(t)
	for _, chart := range []string{"leader-sidecar-lib", "leader-sidecar-example"} {
		t.Run(chart, func(t *testing.T) {
			out, err := sidecartest.RunHelm(t, "lint", "--strict", filepath.Join(dir, chart))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
				t.Fatalf("helm lint --strict:\n%s", out)
			}
		})
	}
	// Lint with each readiness mode and backend, so every branch of the
	// templates is linted.
	for _, c := range sidecartest.ChartMatrix() {
		file := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(file, []byte(c.Values()), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := sidecartest.RunHelm(t, "lint", "--strict", filepath.Join(dir, "leader-sidecar-example"), "--values", file); err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		} else if strings.Contains(out, "[WARNING]") {
			t.Fatalf("%s:\n%s", c.Name(), out)
		}
	}
}

func TestChartTemplateMatrix(t *testing.T) {
	dir := sidecartest.Charts(t)
	known := sidecarEnvNames(t)
	const ns = "apps"
	const fullname = sidecartest.ChartRelease + "-leader-sidecar-example"
	for _, c := range sidecartest.ChartMatrix() {
		t.Run(c.Name(), func(t *testing.T) {
			r := sidecartest.RenderChart(t, dir, ns, c.Values())
			checkRendered(t, r, c, known, fullname, ns)
		})
	}
}

func TestChartTemplateOptions(t *testing.T) {
	dir := sidecartest.Charts(t)
	known := sidecarEnvNames(t)
	const fullname = sidecartest.ChartRelease + "-leader-sidecar-example"
	t.Run("pre-created Lease needs no create", func(t *testing.T) {
		c := sidecartest.ChartCase{Mode: "none", Native: true, Backend: "lease", Extra: "lease:\n  create: true"}
		r := sidecartest.RenderChart(t, dir, "apps", c.Values())
		checkRendered(t, r, c, known, fullname, "apps")
		l := sidecartest.One[*coordinationv1.Lease](t, r)
		if l.Name != fullname {
			t.Fatalf("Lease %s, want %s", l.Name, fullname)
		}
		// helm uninstall must not delete the Lease: its leaseTransitions is
		// the fencing token, and a new Lease would start again at 1.
		if got := l.Annotations["helm.sh/resource-policy"]; got != "keep" {
			t.Fatalf("Lease annotation helm.sh/resource-policy = %q, want keep", got)
		}
	})
	t.Run("events off", func(t *testing.T) {
		c := sidecartest.ChartCase{Mode: "label", Native: true, Backend: "lease", Extra: "events: false"}
		r := sidecartest.RenderChart(t, dir, "apps", c.Values())
		if sidecartest.Find[*coordinationv1.Lease](t, r) != nil {
			t.Fatal("a Lease without lease.create")
		}
		dep := sidecartest.One[*appsv1.Deployment](t, r)
		if e := sidecartest.EnvOf(sidecartest.ContainerNamed(dep.Spec.Template.Spec.InitContainers, "leader-sidecar"))["LEADER_SIDECAR_EVENTS"]; e.Value != "false" {
			t.Fatalf("LEADER_SIDECAR_EVENTS=%q", e.Value)
		}
		// checkRendered expects the events rule unless events: false.
		checkRendered(t, r, c, known, fullname, "apps")
	})
	t.Run("release on shutdown overridden", func(t *testing.T) {
		r := sidecartest.RenderChart(t, dir, "apps", "sidecar:\n  native: false\n  releaseOnShutdown: true\n")
		dep := sidecartest.One[*appsv1.Deployment](t, r)
		if e := sidecartest.EnvOf(sidecartest.ContainerNamed(dep.Spec.Template.Spec.Containers, "leader-sidecar"))["LEADER_SIDECAR_RELEASE_ON_SHUTDOWN"]; e.Value != "true" {
			t.Fatalf("LEADER_SIDECAR_RELEASE_ON_SHUTDOWN=%q, want true", e.Value)
		}
	})
	t.Run("sqlite on a claim", func(t *testing.T) {
		r := sidecartest.RenderChart(t, dir, "apps", "sidecar:\n  backend: sqlite\n  sqlite:\n    volume:\n      type: persistentVolumeClaim\n      claimName: election\n")
		pod := sidecartest.One[*appsv1.Deployment](t, r).Spec.Template.Spec
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "leader-sidecar-db" })
		if i < 0 || pod.Volumes[i].PersistentVolumeClaim == nil || pod.Volumes[i].PersistentVolumeClaim.ClaimName != "election" {
			t.Fatalf("volumes %+v", pod.Volumes)
		}
	})
	t.Run("chosen lease name and strategy", func(t *testing.T) {
		r := sidecartest.RenderChart(t, dir, "apps", "strategy:\n  type: RollingUpdate\n  rollingUpdate:\n    maxSurge: 0\n    maxUnavailable: 1\nsidecar:\n  leaseName: billing\n")
		dep := sidecartest.One[*appsv1.Deployment](t, r)
		if ru := dep.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxSurge.IntValue() != 0 || ru.MaxUnavailable.IntValue() != 1 {
			t.Fatalf("strategy %+v", dep.Spec.Strategy)
		}
		role := sidecartest.One[*rbacv1.Role](t, r)
		if !slices.Equal(role.Rules[0].ResourceNames, []string{"billing"}) {
			t.Fatalf("rules %+v", role.Rules)
		}
		if e := sidecartest.EnvOf(sidecartest.ContainerNamed(dep.Spec.Template.Spec.InitContainers, "leader-sidecar"))["LEADER_SIDECAR_LEASE_NAME"]; e.Value != "billing" {
			t.Fatalf("LEADER_SIDECAR_LEASE_NAME=%q", e.Value)
		}
	})
}

// TestChartLibraryDefaults uses the library from a chart of its own, as a
// user would, with only one setting given: every other one takes the
// library's default, including a false that overrides a true default.
func TestChartLibraryDefaults(t *testing.T) {
	dir := sidecartest.Charts(t)
	user := filepath.Join(dir, "user-app")
	lib := readChartMeta(t, "leader-sidecar-lib")
	files := map[string]string{
		"Chart.yaml": `apiVersion: v2
name: user-app
version: 1.0.0
dependencies:
  - name: leader-sidecar-lib
    version: ` + lib.Version + `
    repository: "file://../leader-sidecar-lib"
`,
		"values.yaml": "sidecar:\n  native: false\n  readiness:\n    mode: label\n",
		"templates/rbac.yaml": `{{ include "leader-sidecar-lib.rbac" . }}
`,
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "leader-sidecar-lib.fullname" . }}
  labels:
    {{- include "leader-sidecar-lib.labels" . | nindent 4 }}
spec:
  strategy:
    {{- include "leader-sidecar-lib.strategy" . | nindent 4 }}
  selector:
    matchLabels:
      {{- include "leader-sidecar-lib.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "leader-sidecar-lib.selectorLabels" . | nindent 8 }}
    spec:
      serviceAccountName: {{ include "leader-sidecar-lib.serviceAccountName" . }}
      securityContext:
        {{- include "leader-sidecar-lib.podSecurityContext" . | nindent 8 }}
      {{- with include "leader-sidecar-lib.initContainers" (dict "context" $) }}
      {{- . | nindent 6 }}
      {{- end }}
      containers:
        - name: app
          image: my/app
        {{- include "leader-sidecar-lib.containers" . | nindent 8 }}
`,
	}
	for name, content := range files {
		path := filepath.Join(user, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sidecartest.RunHelm(t, "dependency", "build", user); err != nil {
		t.Fatal(err)
	}
	out, err := sidecartest.RunHelm(t, "template", "shop", user, "--namespace", "apps")
	if err != nil {
		t.Fatal(err)
	}
	r := sidecartest.DecodeManifests(t, out)
	pod := sidecartest.One[*appsv1.Deployment](t, r).Spec.Template.Spec
	sc := sidecartest.ContainerNamed(pod.Containers, "leader-sidecar")
	if sc == nil || len(pod.InitContainers) != 0 {
		t.Fatalf("native: false did not make a plain container: %+v", pod)
	}
	env := sidecartest.EnvOf(sc)
	for name, want := range map[string]string{
		"LEADER_SIDECAR_RELEASE_ON_SHUTDOWN": "false",
		"LEADER_SIDECAR_BACKEND":             "lease",
		"LEADER_SIDECAR_LEASE_NAME":          "shop-user-app",
		"LEADER_SIDECAR_READINESS_MODE":      "label",
		"LEADER_SIDECAR_EVENTS":              "true",
	} {
		if env[name].Value != want {
			t.Fatalf("%s=%q, want %q", name, env[name].Value, want)
		}
	}
	if sc.Image != sidecarImageRepository+":"+lib.AppVersion || sc.SecurityContext == nil || !*sc.SecurityContext.ReadOnlyRootFilesystem {
		t.Fatalf("defaults not applied: image %s, securityContext %+v", sc.Image, sc.SecurityContext)
	}
	c := sidecartest.ChartCase{Mode: "label", Backend: "lease"}
	if got, want := ruleKeys(sidecartest.One[*rbacv1.Role](t, r).Rules), ruleKeys(wantRules(c, "shop-user-app", false, true)); !slices.Equal(got, want) {
		t.Fatalf("rules %v, want %v", got, want)
	}

	// A value the library does not accept fails the render, naming it.
	if _, err := sidecartest.RunHelm(t, "template", "shop", user, "--set", "sidecar.readiness.mode=leader"); err == nil ||
		!strings.Contains(err.Error(), "sidecar.readiness.mode") {
		t.Fatalf("an invalid mode rendered, or the error does not name it: %v", err)
	}
}

func TestChartSchemaRejectsBadValues(t *testing.T) {
	dir := sidecartest.Charts(t)
	cases := []struct {
		name, values, field string
	}{
		{"unknown readiness mode", "sidecar:\n  readiness:\n    mode: leader\n", "/sidecar/readiness/mode"},
		{"unknown backend", "sidecar:\n  backend: etcd\n", "/sidecar/backend"},
		{"native not a boolean", "sidecar:\n  native: \"yes\"\n", "/sidecar/native"},
		{"duration without unit", "sidecar:\n  leaseDuration: 15\n", "/sidecar/leaseDuration"},
		{"misspelt setting", "sidecar:\n  leaseDurration: 15s\n", "leaseDurration"},
		{"claim without name", "sidecar:\n  backend: sqlite\n  sqlite:\n    volume:\n      type: persistentVolumeClaim\n", "/sidecar/sqlite/volume"},
		{"port out of range", "sidecar:\n  opsPort: 70000\n", "/sidecar/opsPort"},
		{"required image removed", "sidecar:\n  image:\n    repository: null\n", "repository"},
		{"replicas negative", "replicaCount: -1\n", "/replicaCount"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := sidecartest.TemplateChart(t, dir, "apps", c.values)
			if err == nil {
				t.Fatalf("helm accepted values that violate values.schema.json:\n%s", c.values)
			}
			msg := err.Error()
			if !strings.Contains(msg, "values don't meet the specifications of the schema") || !strings.Contains(msg, c.field) {
				t.Fatalf("the error does not name %s as a schema violation:\n%s", c.field, msg)
			}
		})
	}
}
