package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// The charts in charts/ rendered by a pinned helm (hack/helm.sh, or $HELM),
// decoded into typed objects and checked; then sent to the envtest API
// server with server-side dry-run; then their RBAC applied for real with
// the sidecar running as the chart's ServiceAccount.

const chartRelease = "demo"

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm returns the helm binary: $HELM if set, else what hack/helm.sh
// installs. It fails t (never skips): the chart tests are part of the suite.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if p := os.Getenv("HELM"); p != "" {
			helmPath = p
			return
		}
		start := time.Now()
		cmd := exec.Command("../hack/helm.sh")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("hack/helm.sh: %v\n%s", err, stderr.String())
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		helmPath = lines[len(lines)-1]
		fmt.Fprintf(os.Stderr, "helm: %s (hack/helm.sh took %v)\n", helmPath, time.Since(start).Round(time.Millisecond))
	})
	if helmErr != nil {
		t.Fatalf("no helm: %v", helmErr)
	}
	return helmPath
}

// runHelm runs helm with args and returns stdout, or stderr as the error.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(os.TempDir(), "leader-sidecar-helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(os.TempDir(), "leader-sidecar-helm-config"),
		"HELM_DATA_HOME="+filepath.Join(os.TempDir(), "leader-sidecar-helm-data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// charts copies charts/ into a temporary directory and builds the example
// chart's dependency on the library there, so the repository is left as it
// is and the library is always the current one. It returns that directory.
func charts(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "charts")
	if err := os.CopyFS(dir, os.DirFS("../charts")); err != nil {
		t.Fatal(err)
	}
	if _, err := runHelm(t, "dependency", "build", filepath.Join(dir, "leader-sidecar-example")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// chartCase is one combination of values.
type chartCase struct {
	mode    string // readiness mode
	native  bool
	backend string
	extra   string // more values, YAML under sidecar:
}

func (c chartCase) name() string {
	placement := "native"
	if !c.native {
		placement = "plain"
	}
	return c.mode + "/" + placement + "/" + c.backend
}

func (c chartCase) values() string {
	v := fmt.Sprintf("sidecar:\n  native: %t\n  backend: %s\n  readiness:\n    mode: %s\n", c.native, c.backend, c.mode)
	if c.extra != "" {
		v += "  " + strings.ReplaceAll(strings.TrimSpace(c.extra), "\n", "\n  ") + "\n"
	}
	return v
}

func (c chartCase) leaderOnly() bool { return c.mode == "probe" || c.mode == "pod-condition" }

// chartMatrix is every readiness mode x native or plain x lease or sqlite.
func chartMatrix() []chartCase {
	var cases []chartCase
	for _, mode := range []string{"none", "probe", "pod-condition", "label"} {
		for _, native := range []bool{true, false} {
			for _, backend := range []string{"lease", "sqlite"} {
				cases = append(cases, chartCase{mode: mode, native: native, backend: backend})
			}
		}
	}
	return cases
}

// rendered is the output of helm template: every object typed, and as
// unstructured for the API server.
type rendered struct {
	objects []runtime.Object
	raw     []*unstructured.Unstructured
}

// renderChart runs helm template on the example chart in dir with values
// (YAML) in namespace ns and decodes every manifest.
func renderChart(t *testing.T, dir, ns, values string) *rendered {
	t.Helper()
	out, err := templateChart(t, dir, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	return decodeManifests(t, out)
}

func templateChart(t *testing.T, dir, ns, values string) (string, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return runHelm(t, "template", chartRelease, filepath.Join(dir, "leader-sidecar-example"), "--namespace", ns, "--values", file)
}

func decodeManifests(t *testing.T, stream string) *rendered {
	t.Helper()
	r := &rendered{}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		jsonDoc, err := utilyaml.ToJSON(doc)
		if err != nil {
			t.Fatalf("manifest is not YAML: %v\n%s", err, doc)
		}
		if string(jsonDoc) == "null" || len(bytes.TrimSpace(jsonDoc)) == 0 {
			continue
		}
		// Strict: a field the typed API does not know, or a duplicate
		// field, is an error.
		obj, _, err := strictDecoder.Decode(jsonDoc, nil, nil)
		if err != nil {
			t.Fatalf("decoding a manifest: %v\n%s", err, doc)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(jsonDoc); err != nil {
			t.Fatal(err)
		}
		r.objects = append(r.objects, obj)
		r.raw = append(r.raw, u)
	}
	if len(r.objects) == 0 {
		t.Fatal("helm template rendered nothing")
	}
	return r
}

var strictDecoder = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	kjson.SerializerOptions{Strict: true})

func find[T runtime.Object](t *testing.T, r *rendered) []T {
	t.Helper()
	var out []T
	for _, o := range r.objects {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func one[T runtime.Object](t *testing.T, r *rendered) T {
	t.Helper()
	all := find[T](t, r)
	if len(all) != 1 {
		var zero T
		t.Fatalf("rendered %d objects of type %T, want 1", len(all), zero)
	}
	return all[0]
}

func envOf(c *corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func containerNamed(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// sidecarEnvNames is every LEADER_SIDECAR_* variable the binary reads, from
// its --help.
func sidecarEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(sidecarBin, "--help").CombinedOutput()
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
func wantRules(c chartCase, lease string, leaseCreated, events bool) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	if c.backend == "lease" {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			ResourceNames: []string{lease}, Verbs: []string{"get", "update", "watch"}})
		if !leaseCreated {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}})
		}
		if events {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}})
		}
	}
	switch c.mode {
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
	dir := charts(t)
	for _, chart := range []string{"leader-sidecar-lib", "leader-sidecar-example"} {
		t.Run(chart, func(t *testing.T) {
			out, err := runHelm(t, "lint", "--strict", filepath.Join(dir, chart))
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
	for _, c := range chartMatrix() {
		file := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(file, []byte(c.values()), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := runHelm(t, "lint", "--strict", filepath.Join(dir, "leader-sidecar-example"), "--values", file); err != nil {
			t.Fatalf("%s: %v", c.name(), err)
		} else if strings.Contains(out, "[WARNING]") {
			t.Fatalf("%s:\n%s", c.name(), out)
		}
	}
}

func TestChartTemplateMatrix(t *testing.T) {
	dir := charts(t)
	known := sidecarEnvNames(t)
	const ns = "apps"
	const fullname = chartRelease + "-leader-sidecar-example"
	for _, c := range chartMatrix() {
		t.Run(c.name(), func(t *testing.T) {
			r := renderChart(t, dir, ns, c.values())
			checkRendered(t, r, c, known, fullname, ns)
		})
	}
}

func TestChartTemplateOptions(t *testing.T) {
	dir := charts(t)
	known := sidecarEnvNames(t)
	const fullname = chartRelease + "-leader-sidecar-example"
	t.Run("pre-created Lease needs no create", func(t *testing.T) {
		c := chartCase{mode: "none", native: true, backend: "lease", extra: "lease:\n  create: true"}
		r := renderChart(t, dir, "apps", c.values())
		checkRendered(t, r, c, known, fullname, "apps")
		l := one[*coordinationv1.Lease](t, r)
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
		c := chartCase{mode: "label", native: true, backend: "lease", extra: "events: false"}
		r := renderChart(t, dir, "apps", c.values())
		if find[*coordinationv1.Lease](t, r) != nil {
			t.Fatal("a Lease without lease.create")
		}
		dep := one[*appsv1.Deployment](t, r)
		if e := envOf(containerNamed(dep.Spec.Template.Spec.InitContainers, "leader-sidecar"))["LEADER_SIDECAR_EVENTS"]; e.Value != "false" {
			t.Fatalf("LEADER_SIDECAR_EVENTS=%q", e.Value)
		}
		// checkRendered expects the events rule unless events: false.
		checkRendered(t, r, c, known, fullname, "apps")
	})
	t.Run("release on shutdown overridden", func(t *testing.T) {
		r := renderChart(t, dir, "apps", "sidecar:\n  native: false\n  releaseOnShutdown: true\n")
		dep := one[*appsv1.Deployment](t, r)
		if e := envOf(containerNamed(dep.Spec.Template.Spec.Containers, "leader-sidecar"))["LEADER_SIDECAR_RELEASE_ON_SHUTDOWN"]; e.Value != "true" {
			t.Fatalf("LEADER_SIDECAR_RELEASE_ON_SHUTDOWN=%q, want true", e.Value)
		}
	})
	t.Run("sqlite on a claim", func(t *testing.T) {
		r := renderChart(t, dir, "apps", "sidecar:\n  backend: sqlite\n  sqlite:\n    volume:\n      type: persistentVolumeClaim\n      claimName: election\n")
		pod := one[*appsv1.Deployment](t, r).Spec.Template.Spec
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "leader-sidecar-db" })
		if i < 0 || pod.Volumes[i].PersistentVolumeClaim == nil || pod.Volumes[i].PersistentVolumeClaim.ClaimName != "election" {
			t.Fatalf("volumes %+v", pod.Volumes)
		}
	})
	t.Run("chosen lease name and strategy", func(t *testing.T) {
		r := renderChart(t, dir, "apps", "strategy:\n  type: RollingUpdate\n  rollingUpdate:\n    maxSurge: 0\n    maxUnavailable: 1\nsidecar:\n  leaseName: billing\n")
		dep := one[*appsv1.Deployment](t, r)
		if ru := dep.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxSurge.IntValue() != 0 || ru.MaxUnavailable.IntValue() != 1 {
			t.Fatalf("strategy %+v", dep.Spec.Strategy)
		}
		role := one[*rbacv1.Role](t, r)
		if !slices.Equal(role.Rules[0].ResourceNames, []string{"billing"}) {
			t.Fatalf("rules %+v", role.Rules)
		}
		if e := envOf(containerNamed(dep.Spec.Template.Spec.InitContainers, "leader-sidecar"))["LEADER_SIDECAR_LEASE_NAME"]; e.Value != "billing" {
			t.Fatalf("LEADER_SIDECAR_LEASE_NAME=%q", e.Value)
		}
	})
}

// TestChartLibraryDefaults uses the library from a chart of its own, as a
// user would, with only one setting given: every other one takes the
// library's default, including a false that overrides a true default.
func TestChartLibraryDefaults(t *testing.T) {
	dir := charts(t)
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
      {{- with include "leader-sidecar-lib.initContainers" . }}
      initContainers:
        {{- . | nindent 8 }}
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
	if _, err := runHelm(t, "dependency", "build", user); err != nil {
		t.Fatal(err)
	}
	out, err := runHelm(t, "template", "shop", user, "--namespace", "apps")
	if err != nil {
		t.Fatal(err)
	}
	r := decodeManifests(t, out)
	pod := one[*appsv1.Deployment](t, r).Spec.Template.Spec
	sc := containerNamed(pod.Containers, "leader-sidecar")
	if sc == nil || len(pod.InitContainers) != 0 {
		t.Fatalf("native: false did not make a plain container: %+v", pod)
	}
	env := envOf(sc)
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
	c := chartCase{mode: "label", backend: "lease"}
	if got, want := ruleKeys(one[*rbacv1.Role](t, r).Rules), ruleKeys(wantRules(c, "shop-user-app", false, true)); !slices.Equal(got, want) {
		t.Fatalf("rules %v, want %v", got, want)
	}

	// A value the library does not accept fails the render, naming it.
	if _, err := runHelm(t, "template", "shop", user, "--set", "sidecar.readiness.mode=leader"); err == nil ||
		!strings.Contains(err.Error(), "sidecar.readiness.mode") {
		t.Fatalf("an invalid mode rendered, or the error does not name it: %v", err)
	}
}

func TestChartSchemaRejectsBadValues(t *testing.T) {
	dir := charts(t)
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
			_, err := templateChart(t, dir, "apps", c.values)
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
