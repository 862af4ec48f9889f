package e2e

import (
	"bufio"
	"bytes"
	"context"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
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

// checkRendered asserts everything the chart promises for case c.
func checkRendered(t *testing.T, r *rendered, c chartCase, known map[string]bool, fullname, ns string) {
	t.Helper()
	dep := one[*appsv1.Deployment](t, r)
	pod := dep.Spec.Template.Spec

	// Placement: a native sidecar is an init container with restartPolicy
	// Always; a plain one is a container next to the app.
	var sc *corev1.Container
	if c.native {
		sc = containerNamed(pod.InitContainers, "leader-sidecar")
		if sc == nil || containerNamed(pod.Containers, "leader-sidecar") != nil {
			t.Fatalf("native sidecar not (only) in initContainers: init %v, containers %v", pod.InitContainers, pod.Containers)
		}
		if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Fatalf("native sidecar restartPolicy %v, want Always", sc.RestartPolicy)
		}
	} else {
		sc = containerNamed(pod.Containers, "leader-sidecar")
		if sc == nil || len(pod.InitContainers) != 0 {
			t.Fatalf("plain sidecar not in containers: init %v", pod.InitContainers)
		}
		if sc.RestartPolicy != nil {
			t.Fatalf("plain container with restartPolicy %v", *sc.RestartPolicy)
		}
	}
	app := containerNamed(pod.Containers, "app")
	if app == nil {
		t.Fatal("no app container")
	}

	// Environment: the Downward API, and the settings as LEADER_SIDECAR_*.
	env := envOf(sc)
	for name, path := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_UID": "metadata.uid"} {
		e, ok := env[name]
		if !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != path {
			t.Fatalf("%s is not the Downward API's %s: %+v", name, path, e)
		}
	}
	for name := range env {
		if strings.HasPrefix(name, "LEADER_SIDECAR_") && !known[name] {
			t.Fatalf("the sidecar does not read %s", name)
		}
	}
	want := map[string]string{
		"LEADER_SIDECAR_BACKEND":             c.backend,
		"LEADER_SIDECAR_LEASE_NAME":          fullname,
		"LEADER_SIDECAR_READINESS_MODE":      c.mode,
		"LEADER_SIDECAR_RELEASE_ON_SHUTDOWN": fmt.Sprint(c.native),
		"LEADER_SIDECAR_HTTP_ADDRESS":        "127.0.0.1:4040",
		"LEADER_SIDECAR_OPS_ADDRESS":         ":8081",
		"LEADER_SIDECAR_LEASE_DURATION":      "15s",
		"LEADER_SIDECAR_RENEW_DEADLINE":      "10s",
		"LEADER_SIDECAR_RETRY_PERIOD":        "2s",
	}
	absent := map[string]bool{}
	set := func(name, value string, on bool) {
		if on {
			want[name] = value
		} else {
			absent[name] = true
		}
	}
	set("LEADER_SIDECAR_READINESS_CONDITION_TYPE", "leader-sidecar.io/leader", c.mode == "pod-condition")
	set("LEADER_SIDECAR_ROLE_LABEL", "leader-sidecar.io/role", c.mode == "label")
	set("LEADER_SIDECAR_SQLITE_PATH", "/var/lib/leader-sidecar/leader-sidecar.db", c.backend == "sqlite")
	set("LEADER_SIDECAR_EVENTS", fmt.Sprint(!strings.Contains(c.extra, "events: false")), c.backend == "lease")
	for name, value := range want {
		if e, ok := env[name]; !ok || e.Value != value {
			t.Fatalf("%s = %q, want %q", name, e.Value, value)
		}
	}
	for name := range absent {
		if _, ok := env[name]; ok {
			t.Fatalf("%s set in mode %s, backend %s", name, c.mode, c.backend)
		}
	}
	if !slices.Contains(sc.Args, "--ops-address=:8081") {
		t.Fatalf("args %v lack --ops-address=:8081", sc.Args)
	}
	if e := envOf(app)["LEADER_SIDECAR_URL"]; e.Value != "http://127.0.0.1:4040" {
		t.Fatalf("app's LEADER_SIDECAR_URL = %q", e.Value)
	}

	// Probes, all on the ops port.
	if len(sc.Ports) != 1 || sc.Ports[0].Name != "ops" || sc.Ports[0].ContainerPort != 8081 {
		t.Fatalf("ports %+v, want ops 8081", sc.Ports)
	}
	probe := func(what string, p *corev1.Probe, path string) {
		t.Helper()
		if p == nil || p.HTTPGet == nil {
			t.Fatalf("%s probe missing or not httpGet: %+v", what, p)
		}
		if p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "ops" {
			t.Fatalf("%s probe on %s port %s, want %s port ops", what, p.HTTPGet.Path, p.HTTPGet.Port.String(), path)
		}
	}
	probe("startup", sc.StartupProbe, "/healthz")
	probe("liveness", sc.LivenessProbe, "/healthz")
	if c.mode == "probe" {
		probe("readiness", sc.ReadinessProbe, "/leader/ready")
	} else {
		probe("readiness", sc.ReadinessProbe, "/readyz")
	}

	// Pod Security "restricted", for the sidecar and the app.
	ps := pod.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser != 65532 ||
		ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Fatalf("pod securityContext %+v", ps)
	}
	for _, ctr := range []*corev1.Container{sc, app} {
		s := ctr.SecurityContext
		if s == nil || s.RunAsNonRoot == nil || !*s.RunAsNonRoot || s.RunAsUser == nil || *s.RunAsUser != 65532 ||
			s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem ||
			s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation ||
			s.Capabilities == nil || !slices.Equal(s.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(s.Capabilities.Add) != 0 ||
			s.SeccompProfile == nil || s.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || s.Privileged != nil {
			t.Fatalf("container %s securityContext is not restricted: %+v", ctr.Name, s)
		}
	}

	// readinessGates only in pod-condition mode.
	if c.mode == "pod-condition" {
		if len(pod.ReadinessGates) != 1 || pod.ReadinessGates[0].ConditionType != "leader-sidecar.io/leader" {
			t.Fatalf("readinessGates %+v", pod.ReadinessGates)
		}
	} else if len(pod.ReadinessGates) != 0 {
		t.Fatalf("readinessGates %+v in mode %s", pod.ReadinessGates, c.mode)
	}

	// The SQLite volume only with the sqlite backend, mounted by the sidecar.
	var dbVolume *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == "leader-sidecar-db" {
			dbVolume = &pod.Volumes[i]
		}
	}
	mounted := slices.ContainsFunc(sc.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "leader-sidecar-db" && m.MountPath == "/var/lib/leader-sidecar"
	})
	if c.backend == "sqlite" {
		if dbVolume == nil || dbVolume.HostPath == nil || dbVolume.HostPath.Path != "/var/lib/leader-sidecar" || !mounted {
			t.Fatalf("sqlite: volume %+v, mounted %v", dbVolume, mounted)
		}
	} else if dbVolume != nil || len(sc.VolumeMounts) != 0 {
		t.Fatalf("lease backend with a database volume %+v", dbVolume)
	}

	// A strategy that cannot stall under leader-only readiness.
	if c.leaderOnly() {
		if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || dep.Spec.Strategy.RollingUpdate != nil {
			t.Fatalf("mode %s: strategy %+v, want Recreate", c.mode, dep.Spec.Strategy)
		}
	} else if dep.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Fatalf("mode %s: strategy %+v, want RollingUpdate", c.mode, dep.Spec.Strategy)
	}

	// The Service routes to the leader alone in label mode.
	svc := one[*corev1.Service](t, r)
	if role, ok := svc.Spec.Selector["leader-sidecar.io/role"]; (c.mode == "label") != ok || (ok && role != "leader") {
		t.Fatalf("mode %s: Service selector %v", c.mode, svc.Spec.Selector)
	}
	for k, v := range dep.Spec.Selector.MatchLabels {
		if svc.Spec.Selector[k] != v {
			t.Fatalf("Service selector %v does not select the Deployment's Pods %v", svc.Spec.Selector, dep.Spec.Selector.MatchLabels)
		}
	}
	if _, ok := dep.Spec.Selector.MatchLabels["leader-sidecar.io/role"]; ok {
		t.Fatal("the Deployment selects on the role label the sidecar changes")
	}

	// RBAC: exactly the rules of the mode, bound to the Pod's account.
	sa := one[*corev1.ServiceAccount](t, r)
	if pod.ServiceAccountName != sa.Name {
		t.Fatalf("Pod runs as %q, the chart's ServiceAccount is %q", pod.ServiceAccountName, sa.Name)
	}
	needsAPI := c.backend == "lease" || c.mode == "pod-condition" || c.mode == "label"
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken != needsAPI {
		t.Fatalf("automountServiceAccountToken %v, want %v", pod.AutomountServiceAccountToken, needsAPI)
	}
	rules := wantRules(c, fullname, strings.Contains(c.extra, "create: true"), !strings.Contains(c.extra, "events: false"))
	roles := find[*rbacv1.Role](t, r)
	bindings := find[*rbacv1.RoleBinding](t, r)
	if len(rules) == 0 {
		if len(roles) != 0 || len(bindings) != 0 {
			t.Fatalf("mode %s, backend %s needs no API access but got %d Roles", c.mode, c.backend, len(roles))
		}
	} else {
		if len(roles) != 1 || len(bindings) != 1 {
			t.Fatalf("%d Roles, %d RoleBindings, want 1 each", len(roles), len(bindings))
		}
		if got, w := ruleKeys(roles[0].Rules), ruleKeys(rules); !slices.Equal(got, w) {
			t.Fatalf("Role rules:\n  %s\nwant exactly:\n  %s", strings.Join(got, "\n  "), strings.Join(w, "\n  "))
		}
		b := bindings[0]
		if b.RoleRef.Kind != "Role" || b.RoleRef.Name != roles[0].Name || len(b.Subjects) != 1 ||
			b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != sa.Name || b.Subjects[0].Namespace != ns {
			t.Fatalf("RoleBinding %+v does not bind the Role to %s/%s", b, ns, sa.Name)
		}
	}
	for _, o := range r.raw {
		labels := o.GetLabels()
		for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
			if labels[l] == "" {
				t.Fatalf("%s %s lacks label %s", o.GetKind(), o.GetName(), l)
			}
		}
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
		if l := one[*coordinationv1.Lease](t, r); l.Name != fullname {
			t.Fatalf("Lease %s, want %s", l.Name, fullname)
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
	files := map[string]string{
		"Chart.yaml": `apiVersion: v2
name: user-app
version: 1.0.0
dependencies:
  - name: leader-sidecar-lib
    version: 0.1.0
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
	if sc.Image != "leader-sidecar:v0.1.0" || sc.SecurityContext == nil || !*sc.SecurityContext.ReadOnlyRootFilesystem {
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

// dryRunner creates objects with server-side dry-run through a dynamic
// client.
type dryRunner struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newDryRunner(t *testing.T, cfg *rest.Config) *dryRunner {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &dryRunner{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// create sends o to the API server into ns; dryRun only validates and
// admits it. Unknown or duplicate fields are errors (Strict).
func (d *dryRunner) create(ctx context.Context, o *unstructured.Unstructured, ns string, dryRun bool) error {
	gvk := o.GroupVersionKind()
	m, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: %w", gvk, err)
	}
	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var ri dynamic.ResourceInterface = d.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = d.dyn.Resource(m.Resource).Namespace(ns)
	}
	_, err = ri.Create(ctx, o, opts)
	return err
}

func TestChartServerSideDryRun(t *testing.T) {
	dir := charts(t)
	k := kube(t)
	d := newDryRunner(t, k.Config)
	ctx := context.Background()
	cases := append(chartMatrix(), chartCase{mode: "pod-condition", native: true, backend: "lease", extra: "lease:\n  create: true"})
	for _, c := range cases {
		t.Run(c.name(), func(t *testing.T) {
			ns := k.namespace(t)
			r := renderChart(t, dir, ns, c.values())
			for _, o := range r.raw {
				if err := d.create(ctx, o, ns, true); err != nil {
					t.Fatalf("the API server refused %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			// Nothing was stored.
			if sas, err := k.client.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			} else if slices.ContainsFunc(sas.Items, func(sa corev1.ServiceAccount) bool { return sa.Name != "default" }) {
				t.Fatalf("dry-run stored ServiceAccounts: %v", sas.Items)
			}
		})
	}
}

// TestChartPodSecurityRestricted admits the Deployment's Pod template as a
// Pod (dry-run) in a namespace that enforces Pod Security "restricted": the
// lease backend passes; the sqlite backend's hostPath volume is refused, as
// the chart documents.
func TestChartPodSecurityRestricted(t *testing.T) {
	dir := charts(t)
	k := kube(t)
	ctx := context.Background()
	for _, c := range []chartCase{
		{mode: "pod-condition", native: true, backend: "lease"},
		{mode: "label", native: false, backend: "lease"},
		{mode: "none", native: true, backend: "sqlite"},
	} {
		t.Run(c.name(), func(t *testing.T) {
			ns := k.namespace(t)
			nsObj, err := k.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
			nsObj.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
			if _, err := k.client.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			dep := one[*appsv1.Deployment](t, renderChart(t, dir, ns, c.values()))
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "probe-pod", Namespace: ns, Labels: dep.Spec.Template.Labels},
				Spec:       dep.Spec.Template.Spec,
			}
			_, err = k.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if c.backend == "sqlite" {
				if err == nil || !strings.Contains(err.Error(), "hostPath") {
					t.Fatalf("a hostPath volume passed Pod Security restricted: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Pod Security restricted refused the Pod: %v", err)
			}
		})
	}
}

// TestChartRBACForReal applies the chart's ServiceAccount, Role and
// RoleBinding (and Lease) to the API server and runs the real sidecar as
// that ServiceAccount: it leads, marks its Pod in the matching mode, logs
// nothing forbidden, and cannot touch another Lease, another namespace, or
// Pods beyond what its mode needs.
func TestChartRBACForReal(t *testing.T) {
	dir := charts(t)
	for _, c := range []chartCase{
		{mode: "none", native: true, backend: "lease"},
		{mode: "pod-condition", native: true, backend: "lease"},
		{mode: "label", native: false, backend: "lease"},
		{mode: "probe", native: true, backend: "lease", extra: "lease:\n  create: true\nevents: false"},
	} {
		t.Run(c.name(), func(t *testing.T) {
			k := kube(t)
			ctx := context.Background()
			ns := k.namespace(t)
			r := renderChart(t, dir, ns, c.values())
			d := newDryRunner(t, k.Config)
			for _, o := range r.raw {
				switch o.GetKind() {
				case "ServiceAccount", "Role", "RoleBinding", "Lease":
					if err := d.create(ctx, o, ns, false); err != nil {
						t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
					}
				}
			}
			dep := one[*appsv1.Deployment](t, r)
			sa := dep.Spec.Template.Spec.ServiceAccountName
			user := "system:serviceaccount:" + ns + ":" + sa
			all := append(slices.Clone(dep.Spec.Template.Spec.InitContainers), dep.Spec.Template.Spec.Containers...)
			sc := containerNamed(all, "leader-sidecar")
			leaseName := envOf(sc)["LEADER_SIDECAR_LEASE_NAME"].Value

			// The rendered container's environment, with the Downward API
			// filled in for a Pod object of our own; the test's timings and
			// loopback addresses given as flags (which win over variables).
			podName := "demo-0"
			uid := createPod(t, k, ns, podName)
			var env []string
			for _, e := range sc.Env {
				value := e.Value
				if e.ValueFrom != nil {
					value = map[string]string{"metadata.name": podName, "metadata.namespace": ns, "metadata.uid": uid}[e.ValueFrom.FieldRef.FieldPath]
				}
				env = append(env, e.Name+"="+value)
			}
			kc := k.kubeconfig(t, user)
			s := spawn(t, env, "--kubeconfig", kc, "--ops-address", "127.0.0.1:0")
			s.waitServing()
			_, token := awaitLeader(t, []*sidecar{s}, 15*time.Second)
			leaseShows(t, k, ns, leaseName, identityOf(t, s), token)
			if c.mode == "pod-condition" || c.mode == "label" {
				awaitMarked(t, k, ns, c.mode, podName)
			}
			time.Sleep(2 * renewDeadline) // renewals and events go through
			if _, again := awaitLeader(t, []*sidecar{s}, time.Second); again != token {
				t.Fatalf("token moved from %d to %d", token, again)
			}
			if logs := s.logs.String(); strings.Contains(logs, "forbidden") {
				t.Fatalf("the chart's Role lacks a permission the sidecar used:\n%s", logs)
			}

			// What the account must not do.
			cfg := rest.CopyConfig(k.Config)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
			as, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}
			if _, err := k.client.CoordinationV1().Leases(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			otherNS := k.namespace(t)
			forbidden := map[string]error{}
			_, forbidden["get another Lease"] = as.CoordinationV1().Leases(ns).Get(ctx, "other", metav1.GetOptions{})
			_, forbidden["update another Lease"] = as.CoordinationV1().Leases(ns).Update(ctx, other, metav1.UpdateOptions{})
			forbidden["delete its own Lease"] = as.CoordinationV1().Leases(ns).Delete(ctx, leaseName, metav1.DeleteOptions{})
			_, forbidden["list Leases"] = as.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			_, forbidden["get its Lease in another namespace"] = as.CoordinationV1().Leases(otherNS).Get(ctx, leaseName, metav1.GetOptions{})
			_, forbidden["create a Lease in another namespace"] = as.CoordinationV1().Leases(otherNS).Create(ctx,
				&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName}}, metav1.CreateOptions{})
			_, forbidden["list Pods"] = as.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			_, forbidden["read Secrets"] = as.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			patch := []byte(`{"metadata":{"labels":{"x":"y"}}}`)
			if c.mode != "label" {
				_, forbidden["patch a Pod"] = as.CoreV1().Pods(ns).Patch(ctx, podName, types.MergePatchType, patch, metav1.PatchOptions{})
			}
			if c.mode != "pod-condition" {
				_, forbidden["patch a Pod's status"] = as.CoreV1().Pods(ns).Patch(ctx, podName, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
			}
			if c.mode != "pod-condition" && c.mode != "label" {
				_, forbidden["get a Pod"] = as.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
			}
			if strings.Contains(c.extra, "create: true") {
				_, forbidden["create a Lease"] = as.CoordinationV1().Leases(ns).Create(ctx,
					&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
			}
			for what, err := range forbidden {
				if !apierrors.IsForbidden(err) {
					t.Errorf("%s as %s: %v, want Forbidden", what, user, err)
				}
			}
		})
	}
}
