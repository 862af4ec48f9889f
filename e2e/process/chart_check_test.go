package process

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

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
