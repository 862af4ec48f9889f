package chart

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

// The example chart rendered by a pinned helm (hack/helm.sh, or $HELM) over
// every readiness mode, placement and backend and its other options,
// decoded into typed objects and checked for everything it promises
// (checkRendered); and the library used from a chart of its own. The
// API server takes the same renderings in apiserver_test.go.

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
	// The Pod's label and its deletion cost need get and patch on pods;
	// its condition needs get on pods and patch on pods/status.
	switch {
	case c.Mode == "label" || deletionCost(c):
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}})
	case c.Mode == "pod-condition":
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}})
	}
	if c.Mode == "pod-condition" {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}})
	}
	return rules
}

// deletionCost reports whether the case's leader Pod carries the deletion
// cost: the lease backend, unless podDeletionCost: false.
func deletionCost(c sidecartest.ChartCase) bool {
	return c.Backend == "lease" && !strings.Contains(c.Extra, "podDeletionCost: false")
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
	lib := sidecartest.ReadChartMeta(t, "leader-sidecar-lib")
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
	if sc.Image != sidecartest.SidecarImageRepository+":"+lib.AppVersion || sc.SecurityContext == nil || !*sc.SecurityContext.ReadOnlyRootFilesystem {
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

// checkRendered asserts everything the chart promises for case c.
func checkRendered(t *testing.T, r *sidecartest.Rendered, c sidecartest.ChartCase, known map[string]bool, fullname, ns string) {
	t.Helper()
	dep := sidecartest.One[*appsv1.Deployment](t, r)
	pod := dep.Spec.Template.Spec

	// Placement: a native sidecar is an init container with restartPolicy
	// Always; a plain one is a container next to the app.
	var sc *corev1.Container
	if c.Native {
		sc = sidecartest.ContainerNamed(pod.InitContainers, "leader-sidecar")
		if sc == nil || sidecartest.ContainerNamed(pod.Containers, "leader-sidecar") != nil {
			t.Fatalf("native sidecar not (only) in initContainers: init %v, containers %v", pod.InitContainers, pod.Containers)
		}
		if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Fatalf("native sidecar restartPolicy %v, want Always", sc.RestartPolicy)
		}
	} else {
		sc = sidecartest.ContainerNamed(pod.Containers, "leader-sidecar")
		if sc == nil || len(pod.InitContainers) != 0 {
			t.Fatalf("plain sidecar not in containers: init %v", pod.InitContainers)
		}
		if sc.RestartPolicy != nil {
			t.Fatalf("plain container with restartPolicy %v", *sc.RestartPolicy)
		}
	}
	app := sidecartest.ContainerNamed(pod.Containers, "app")
	if app == nil {
		t.Fatal("no app container")
	}

	// Environment: the Downward API, and the settings as LEADER_SIDECAR_*.
	env := sidecartest.EnvOf(sc)
	for name, path := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_UID": "metadata.uid",
		"POD_TEMPLATE_HASH": "metadata.labels['pod-template-hash']", "POD_CONTROLLER_REVISION_HASH": "metadata.labels['controller-revision-hash']"} {
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
		"LEADER_SIDECAR_BACKEND":             c.Backend,
		"LEADER_SIDECAR_LEASE_NAME":          fullname,
		"LEADER_SIDECAR_READINESS_MODE":      c.Mode,
		"LEADER_SIDECAR_RELEASE_ON_SHUTDOWN": fmt.Sprint(c.Native),
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
	set("LEADER_SIDECAR_READINESS_CONDITION_TYPE", "leader-sidecar.io/leader", c.Mode == "pod-condition")
	set("LEADER_SIDECAR_ROLE_LABEL", "leader-sidecar.io/role", c.Mode == "label")
	set("LEADER_SIDECAR_SQLITE_PATH", "/var/lib/leader-sidecar/leader-sidecar.db", c.Backend == "sqlite")
	set("LEADER_SIDECAR_EVENTS", fmt.Sprint(!strings.Contains(c.Extra, "events: false")), c.Backend == "lease")
	set("LEADER_SIDECAR_POD_DELETION_COST", fmt.Sprint(deletionCost(c)), c.Backend == "lease")
	for name, value := range want {
		if e, ok := env[name]; !ok || e.Value != value {
			t.Fatalf("%s = %q, want %q", name, e.Value, value)
		}
	}
	for name := range absent {
		if _, ok := env[name]; ok {
			t.Fatalf("%s set in mode %s, backend %s", name, c.Mode, c.Backend)
		}
	}
	if !slices.Contains(sc.Args, "--ops-address=:8081") {
		t.Fatalf("args %v lack --ops-address=:8081", sc.Args)
	}
	if e := sidecartest.EnvOf(app)["LEADER_SIDECAR_URL"]; e.Value != "http://127.0.0.1:4040" {
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
	if c.Mode == "probe" {
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
	if c.Mode == "pod-condition" {
		if len(pod.ReadinessGates) != 1 || pod.ReadinessGates[0].ConditionType != "leader-sidecar.io/leader" {
			t.Fatalf("readinessGates %+v", pod.ReadinessGates)
		}
	} else if len(pod.ReadinessGates) != 0 {
		t.Fatalf("readinessGates %+v in mode %s", pod.ReadinessGates, c.Mode)
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
	if c.Backend == "sqlite" {
		if dbVolume == nil || dbVolume.HostPath == nil || dbVolume.HostPath.Path != "/var/lib/leader-sidecar" || !mounted {
			t.Fatalf("sqlite: volume %+v, mounted %v", dbVolume, mounted)
		}
	} else if dbVolume != nil || slices.ContainsFunc(sc.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "leader-sidecar-db" }) {
		t.Fatalf("lease backend with a database volume %+v", dbVolume)
	}

	// A strategy that cannot stall under leader-only readiness.
	if c.LeaderOnly() {
		if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || dep.Spec.Strategy.RollingUpdate != nil {
			t.Fatalf("mode %s: strategy %+v, want Recreate", c.Mode, dep.Spec.Strategy)
		}
	} else if dep.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Fatalf("mode %s: strategy %+v, want RollingUpdate", c.Mode, dep.Spec.Strategy)
	}

	// The Service routes to the leader alone in label mode.
	svc := sidecartest.One[*corev1.Service](t, r)
	if role, ok := svc.Spec.Selector["leader-sidecar.io/role"]; (c.Mode == "label") != ok || (ok && role != "leader") {
		t.Fatalf("mode %s: Service selector %v", c.Mode, svc.Spec.Selector)
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
	sa := sidecartest.One[*corev1.ServiceAccount](t, r)
	if pod.ServiceAccountName != sa.Name {
		t.Fatalf("Pod runs as %q, the chart's ServiceAccount is %q", pod.ServiceAccountName, sa.Name)
	}
	// The token in the sidecar alone, when it talks to the API server.
	needsAPI := c.Backend == "lease" || c.Mode == "pod-condition" || c.Mode == "label"
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Fatalf("automountServiceAccountToken %v, want false", pod.AutomountServiceAccountToken)
	}
	tokenVolume := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "leader-sidecar-token" })
	tokenMount := slices.IndexFunc(sc.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "leader-sidecar-token" })
	if (tokenVolume >= 0) != needsAPI || (tokenMount >= 0) != needsAPI {
		t.Fatalf("needs the API %v: token volume %d, mounted by the sidecar %d", needsAPI, tokenVolume, tokenMount)
	}
	if needsAPI {
		sidecartest.CheckTokenVolume(t, pod.Volumes[tokenVolume])
		if m := sc.VolumeMounts[tokenMount]; m.MountPath != sidecartest.TokenMountPath || !m.ReadOnly {
			t.Fatalf("token mount %+v", m)
		}
	}
	if slices.ContainsFunc(app.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "leader-sidecar-token" }) {
		t.Fatal("the app mounts the sidecar's token")
	}
	rules := wantRules(c, fullname, strings.Contains(c.Extra, "create: true"), !strings.Contains(c.Extra, "events: false"))
	roles := sidecartest.Find[*rbacv1.Role](t, r)
	bindings := sidecartest.Find[*rbacv1.RoleBinding](t, r)
	if len(rules) == 0 {
		if len(roles) != 0 || len(bindings) != 0 {
			t.Fatalf("mode %s, backend %s needs no API access but got %d Roles", c.Mode, c.Backend, len(roles))
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
	for _, o := range r.Raw {
		labels := o.GetLabels()
		for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
			if labels[l] == "" {
				t.Fatalf("%s %s lacks label %s", o.GetKind(), o.GetName(), l)
			}
		}
	}
}
