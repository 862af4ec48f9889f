package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The library chart inside someone else's chart: a chart made by
// `helm create mychart`, changed exactly as charts/leader-sidecar-lib/README.md
// says, with the README's own code blocks.

const tokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// libReadmeBlocks returns the fenced yaml blocks of the library's README.
func libReadmeBlocks(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../charts/leader-sidecar-lib/README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// readmeBlock is the one README block that contains every marker.
func readmeBlock(t *testing.T, markers ...string) string {
	t.Helper()
	var found []string
	for _, b := range libReadmeBlocks(t) {
		if !slices.ContainsFunc(markers, func(m string) bool { return !strings.Contains(b, m) }) {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the library README has %d yaml blocks with %q, want 1", len(found), markers)
	}
	return found[0]
}

// helmCreateWithLibrary makes mychart with helm create in the copy of
// charts/ and adds the library as its README says.
func helmCreateWithLibrary(t *testing.T) string {
	t.Helper()
	dir := charts(t)
	if _, err := runHelm(t, "create", filepath.Join(dir, "mychart")); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(dir, "mychart")
	f, err := os.OpenFile(filepath.Join(chart, "Chart.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("\n" + readmeBlock(t, "dependencies:", "leader-sidecar-lib"))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(chart, "templates", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("rbac.yaml", readmeBlock(t, `include "leader-sidecar-lib.rbac"`))

	// helm create's Deployment with the README's strategy and Pod spec:
	// its header, selector and Pod metadata are kept.
	created, err := os.ReadFile(filepath.Join(chart, "templates", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pod := readmeBlock(t, "serviceAccountName:", "leader-sidecar-lib.initContainers")
	header, rest := mustCut(t, string(created), "  template:\n")
	podMeta, _ := mustCut(t, rest, "    spec:\n")
	strategy, podSpec := mustCut(t, strings.TrimPrefix(pod, "spec:\n"), "  template:\n")
	_, podSpec = mustCut(t, podSpec, "    spec:\n")
	write("deployment.yaml", header+strategy+"  template:\n"+podMeta+"    spec:\n"+podSpec)
	if _, err := runHelm(t, "dependency", "build", chart); err != nil {
		t.Fatal(err)
	}
	return chart
}

func mustCut(t *testing.T, s, sep string) (string, string) {
	t.Helper()
	before, after, ok := strings.Cut(s, sep)
	if !ok {
		t.Fatalf("%q not found in:\n%s", sep, s)
	}
	return before, after
}

func templateMyChart(t *testing.T, chart string, set ...string) (*rendered, error) {
	t.Helper()
	args := []string{"template", "shop", chart, "--namespace", "apps"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		return nil, err
	}
	return decodeManifests(t, out), nil
}

func TestChartLibraryInHelmCreateChart(t *testing.T) {
	chart := helmCreateWithLibrary(t)
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
			r, err := templateMyChart(t, chart, c.set...)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, o := range r.raw {
				key := o.GetKind() + "/" + o.GetName()
				if seen[key] {
					t.Fatalf("%s rendered twice", key)
				}
				seen[key] = true
			}
			if sas := find[*corev1.ServiceAccount](t, r); len(sas) != c.accounts || (c.accounts == 1 && sas[0].Name != c.account) {
				t.Fatalf("ServiceAccounts %v, want %d named %s", sas, c.accounts, c.account)
			}
			pod := one[*appsv1.Deployment](t, r).Spec.Template.Spec
			if pod.ServiceAccountName != c.account {
				t.Fatalf("the Pod runs as %q, want %q", pod.ServiceAccountName, c.account)
			}
			bindings := find[*rbacv1.RoleBinding](t, r)
			if !c.needsAPI {
				if len(bindings) != 0 || len(find[*rbacv1.Role](t, r)) != 0 {
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
			sc := containerNamed(all, "leader-sidecar")
			app := containerNamed(pod.Containers, "app")
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
				checkTokenVolume(t, projected[0])
				i := slices.IndexFunc(sc.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == projected[0].Name })
				if i < 0 || sc.VolumeMounts[i].MountPath != tokenMountPath || !sc.VolumeMounts[i].ReadOnly {
					t.Fatalf("the sidecar mounts %+v, want %s read-only at %s", sc.VolumeMounts, projected[0].Name, tokenMountPath)
				}
			}
			for _, m := range app.VolumeMounts {
				if m.MountPath == tokenMountPath || slices.ContainsFunc(projected, func(v corev1.Volume) bool { return v.Name == m.Name }) {
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
		_, err := templateMyChart(t, chart, set...)
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
		if out, err := runHelm(t, args...); err != nil || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
			t.Fatalf("helm lint --strict %v: %v\n%s", set, err, out)
		}
	}

	// The API server takes every object.
	r, err := templateMyChart(t, chart)
	if err != nil {
		t.Fatal(err)
	}
	k := kube(t)
	ns := k.namespace(t)
	d := newDryRunner(t, k.Config)
	for _, o := range r.raw {
		if err := d.create(context.Background(), o, ns, true); err != nil {
			t.Fatalf("the API server refused %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// checkTokenVolume: what the kubelet would mount for an automounted token
// (token, ca.crt, namespace), so the sidecar's in-cluster client works.
func checkTokenVolume(t *testing.T, v corev1.Volume) {
	t.Helper()
	var token, ca, namespace bool
	for _, s := range v.Projected.Sources {
		switch {
		case s.ServiceAccountToken != nil:
			token = s.ServiceAccountToken.Path == "token" && s.ServiceAccountToken.Audience == ""
		case s.ConfigMap != nil:
			ca = s.ConfigMap.Name == "kube-root-ca.crt" && len(s.ConfigMap.Items) == 1 && s.ConfigMap.Items[0].Path == "ca.crt"
		case s.DownwardAPI != nil:
			namespace = len(s.DownwardAPI.Items) == 1 && s.DownwardAPI.Items[0].Path == "namespace" &&
				s.DownwardAPI.Items[0].FieldRef != nil && s.DownwardAPI.Items[0].FieldRef.FieldPath == "metadata.namespace"
		}
	}
	if !token || !ca || !namespace {
		t.Fatalf("token volume %+v: token %v, ca.crt %v, namespace %v", v.Projected, token, ca, namespace)
	}
}
