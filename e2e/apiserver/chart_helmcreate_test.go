package apiserver

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestChartLibraryInHelmCreateChart: the library chart inside someone
// else's chart, a chart made by `helm create mychart` and changed exactly as
// charts/leader-sidecar-lib/README.md says, with the README's own code
// blocks; rendered with several values, linted, and taken by the API server.
func TestChartLibraryInHelmCreateChart(t *testing.T) {
	chart := sidecartest.HelmCreateWithLibrary(t)
	cases := []struct {
		name     string
		set      []string
		account  string // the Pod's ServiceAccount, and the RoleBinding's subject
		accounts int    // ServiceAccounts rendered
		needsAPI bool
	}{
		{name: "helm create's values", account: "shop-mychart", accounts: 1, needsAPI: true},
		{name: "the chart's account named", set: []string{"serviceAccount.name=worker"}, account: "worker", accounts: 1, needsAPI: true},
		{name: "an account made elsewhere", set: []string{"serviceAccount.create=false", "serviceAccount.name=runner"}, account: "runner", needsAPI: true},
		{name: "default named explicitly", set: []string{"serviceAccount.create=false", "serviceAccount.name=default"}, account: "default", needsAPI: true},
		{name: "label mode, plain container", set: []string{"sidecar.readiness.mode=label", "sidecar.native=false"}, account: "shop-mychart", accounts: 1, needsAPI: true},
		{name: "sqlite needs no account", set: []string{"sidecar.backend=sqlite", "serviceAccount.create=false"}, account: "default"},
		{name: "the chart's own security settings", set: []string{"podSecurityContext.fsGroup=2000", "securityContext.runAsUser=1000"},
			account: "shop-mychart", accounts: 1, needsAPI: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := sidecartest.TemplateMyChart(t, chart, c.set...)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, o := range r.Raw {
				key := o.GetKind() + "/" + o.GetName()
				if seen[key] {
					t.Fatalf("%s rendered twice", key)
				}
				seen[key] = true
			}
			if sas := sidecartest.Find[*corev1.ServiceAccount](t, r); len(sas) != c.accounts || (c.accounts == 1 && sas[0].Name != c.account) {
				t.Fatalf("ServiceAccounts %v, want %d named %s", sas, c.accounts, c.account)
			}
			pod := sidecartest.One[*appsv1.Deployment](t, r).Spec.Template.Spec
			if pod.ServiceAccountName != c.account {
				t.Fatalf("the Pod runs as %q, want %q", pod.ServiceAccountName, c.account)
			}
			bindings := sidecartest.Find[*rbacv1.RoleBinding](t, r)
			if !c.needsAPI {
				if len(bindings) != 0 || len(sidecartest.Find[*rbacv1.Role](t, r)) != 0 {
					t.Fatal("a Role for a sidecar that does not talk to the API server")
				}
			} else if len(bindings) != 1 || len(bindings[0].Subjects) != 1 ||
				bindings[0].Subjects[0].Name != c.account || bindings[0].Subjects[0].Namespace != "apps" {
				t.Fatalf("RoleBindings %+v, want one to %s", bindings, c.account)
			}

			// The token only in the sidecar, through a projected volume.
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Fatalf("automountServiceAccountToken %v, want false", pod.AutomountServiceAccountToken)
			}
			all := append(slices.Clone(pod.InitContainers), pod.Containers...)
			sc := sidecartest.ContainerNamed(all, "leader-sidecar")
			app := sidecartest.ContainerNamed(pod.Containers, "mychart")
			if sc == nil || app == nil {
				t.Fatalf("containers %+v %+v", pod.InitContainers, pod.Containers)
			}
			var projected []corev1.Volume
			for _, v := range pod.Volumes {
				if v.Projected != nil {
					projected = append(projected, v)
				}
			}
			if len(pod.Volumes) != len(projected)+map[bool]int{true: 1}[slices.Contains(c.set, "sidecar.backend=sqlite")] {
				t.Fatalf("volumes %+v", pod.Volumes)
			}
			if !c.needsAPI {
				if len(projected) != 0 {
					t.Fatalf("a token volume for a sidecar that does not talk to the API server: %+v", projected)
				}
			} else {
				if len(projected) != 1 {
					t.Fatalf("projected volumes %+v, want the sidecar's token", projected)
				}
				sidecartest.CheckTokenVolume(t, projected[0])
				i := slices.IndexFunc(sc.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == projected[0].Name })
				if i < 0 || sc.VolumeMounts[i].MountPath != sidecartest.TokenMountPath || !sc.VolumeMounts[i].ReadOnly {
					t.Fatalf("the sidecar mounts %+v, want %s read-only at %s", sc.VolumeMounts, projected[0].Name, sidecartest.TokenMountPath)
				}
			}
			for _, m := range app.VolumeMounts {
				if m.MountPath == sidecartest.TokenMountPath || slices.ContainsFunc(projected, func(v corev1.Volume) bool { return v.Name == m.Name }) {
					t.Fatalf("the app container mounts the token: %+v", m)
				}
			}

			// The app and the Pod keep the chart's own security settings
			// (helm create's are empty).
			if slices.Contains(c.set, "securityContext.runAsUser=1000") {
				if pod.SecurityContext == nil || pod.SecurityContext.FSGroup == nil || *pod.SecurityContext.FSGroup != 2000 || pod.SecurityContext.RunAsUser != nil ||
					app.SecurityContext == nil || *app.SecurityContext.RunAsUser != 1000 || app.SecurityContext.ReadOnlyRootFilesystem != nil {
					t.Fatalf("the chart's security settings were changed: pod %+v, app %+v", pod.SecurityContext, app.SecurityContext)
				}
			} else if app.SecurityContext != nil || pod.SecurityContext != nil {
				t.Fatalf("security settings forced on the chart: pod %+v, app %+v", pod.SecurityContext, app.SecurityContext)
			}
			if sc.SecurityContext == nil || sc.SecurityContext.RunAsNonRoot == nil || !*sc.SecurityContext.RunAsNonRoot ||
				sc.SecurityContext.SeccompProfile == nil || !*sc.SecurityContext.ReadOnlyRootFilesystem {
				t.Fatalf("the sidecar's securityContext %+v", sc.SecurityContext)
			}
		})
	}

	// The namespace's default ServiceAccount is never bound implicitly.
	for _, set := range [][]string{
		{"serviceAccount.create=false"},
		{"serviceAccount.create=false", "sidecar.readiness.mode=label", "sidecar.backend=sqlite"},
	} {
		_, err := sidecartest.TemplateMyChart(t, chart, set...)
		if err == nil || !strings.Contains(err.Error(), "serviceAccount.name") || !strings.Contains(err.Error(), `"default"`) {
			t.Fatalf("%v: rendered, or the error does not name serviceAccount.name: %v", set, err)
		}
	}

	// helm lint --strict is clean on the chart the README makes.
	for _, set := range [][]string{nil, {"sidecar.readiness.mode=pod-condition"}, {"sidecar.backend=sqlite", "sidecar.native=false"}} {
		args := []string{"lint", "--strict", chart}
		for _, v := range set {
			args = append(args, "--set", v)
		}
		if out, err := sidecartest.RunHelm(t, args...); err != nil || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
			t.Fatalf("helm lint --strict %v: %v\n%s", set, err, out)
		}
	}

	// The API server takes every object.
	r, err := sidecartest.TemplateMyChart(t, chart)
	if err != nil {
		t.Fatal(err)
	}
	k := sidecartest.Kube(t)
	ns := k.Namespace(t)
	d := newDryRunner(t, k.Config)
	for _, o := range r.Raw {
		if err := d.create(context.Background(), o, ns, true); err != nil {
			t.Fatalf("the API server refused %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}
