package chart

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The library chart inside someone else's chart, as its README tells a user
// to use it: a chart made by `helm create` and changed with the README's own
// code blocks (sidecartest.HelmCreateWithLibrary), and the README's CronJob.

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

// userPodLists are a helm create chart's own Pod lists, as its values.yaml
// suggests them (a Secret volume mounted into its container, a pull
// secret), and an init container of its own.
const userPodLists = `volumes:
  - name: foo
    secret:
      secretName: mysecret
      optional: false
volumeMounts:
  - name: foo
    mountPath: /etc/foo
    readOnly: true
imagePullSecrets:
  - name: regcred
initContainers:
  - name: migrate
    image: my/migrate
`

// TestChartHelmCreateKeepsItsLists: the library README's recipe in a
// helm create chart keeps the chart's volumes, volume mounts, pull secrets
// and init containers next to the sidecar's, each list under one key (the
// manifests are decoded strictly: a key rendered twice fails), on every
// backend and placement, and every volume mount names a volume of the Pod.
func TestChartHelmCreateKeepsItsLists(t *testing.T) {
	chart := sidecartest.HelmCreateWithLibrary(t)
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte(userPodLists), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		set         []string
		wantVolumes []string
		wantInit    []string
	}{
		{nil, []string{"foo", "leader-sidecar-token"}, []string{"leader-sidecar", "migrate"}},
		{[]string{"sidecar.native=false"}, []string{"foo", "leader-sidecar-token"}, []string{"migrate"}},
		{[]string{"sidecar.backend=sqlite"}, []string{"foo", "leader-sidecar-db"}, []string{"leader-sidecar", "migrate"}},
	} {
		args := []string{"template", "shop", chart, "--namespace", "apps", "--values", file}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		out, err := sidecartest.RunHelm(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		pod := sidecartest.One[*appsv1.Deployment](t, sidecartest.DecodeManifests(t, out)).Spec.Template.Spec
		if got := volumeNames(pod.Volumes); !slices.Equal(got, c.wantVolumes) {
			t.Errorf("%v: volumes %q, want %q", c.set, got, c.wantVolumes)
		}
		var inits, secrets []string
		for _, ic := range pod.InitContainers {
			inits = append(inits, ic.Name)
		}
		if !slices.Equal(inits, c.wantInit) {
			t.Errorf("%v: initContainers %q, want %q", c.set, inits, c.wantInit)
		}
		for _, s := range pod.ImagePullSecrets {
			secrets = append(secrets, s.Name)
		}
		if !slices.Equal(secrets, []string{"regcred"}) {
			t.Errorf("%v: imagePullSecrets %q, want [regcred]", c.set, secrets)
		}
		app := sidecartest.ContainerNamed(pod.Containers, "mychart")
		if app == nil || len(app.VolumeMounts) != 1 || app.VolumeMounts[0].Name != "foo" {
			t.Fatalf("%v: the chart's container lost its volume mount: %+v", c.set, app)
		}
		for _, ctr := range slices.Concat(pod.InitContainers, pod.Containers) {
			for _, m := range ctr.VolumeMounts {
				if !slices.Contains(volumeNames(pod.Volumes), m.Name) {
					t.Errorf("%v: container %s mounts %q, which is no volume of the Pod", c.set, ctr.Name, m.Name)
				}
			}
		}
	}
}

// TestChartListHelpersRefuseWhatWouldBreakThePod: a chart volume or init
// container with the sidecar's name, a list that is not a list, and the
// root context where the helper needs the chart's list each fail the
// render, naming what is wrong.
func TestChartListHelpersRefuseWhatWouldBreakThePod(t *testing.T) {
	chart := sidecartest.HelmCreateWithLibrary(t)
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"volumes[0].name=leader-sidecar-token", "volumes[0].emptyDir.medium=Memory"},
			`the chart's volumes have one named "leader-sidecar-token"`},
		{[]string{"initContainers[0].name=leader-sidecar", "initContainers[0].image=x"},
			`the chart's initContainers have one named "leader-sidecar"`},
		{[]string{"volumes=foo"}, "leader-sidecar-lib.volumes: volumes must be a list, not foo"},
	} {
		if _, err := sidecartest.TemplateMyChart(t, chart, c.set...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.set, err, c.want)
		}
	}
	deployment := filepath.Join(chart, "templates", "deployment.yaml")
	raw, err := os.ReadFile(deployment)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(raw), `include "leader-sidecar-lib.volumes" (dict "volumes" .Values.volumes "context" $)`, `include "leader-sidecar-lib.volumes" .`, 1)
	if old == string(raw) {
		t.Fatal("the volumes helper's call is not in the chart")
	}
	if err := os.WriteFile(deployment, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	want := `leader-sidecar-lib.volumes takes (dict "volumes" .Values.volumes "context" $)`
	if _, err := sidecartest.TemplateMyChart(t, chart); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("the root context given to the volumes helper: %v, want an error with %q", err, want)
	}
}

func volumeNames(vs []corev1.Volume) []string {
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
	}
	return names
}

// cronJobChart is a helm create chart with the library and the library
// README's CronJob in templates/cronjob.yaml.
func cronJobChart(t testing.TB) string {
	t.Helper()
	chart := sidecartest.HelmCreateWithLibrary(t)
	cronJob := sidecartest.ReadmeBlock(t, "kind: CronJob", "concurrencyPolicy:")
	if err := os.WriteFile(filepath.Join(chart, "templates", "cronjob.yaml"), []byte(cronJob), 0o644); err != nil {
		t.Fatal(err)
	}
	return chart
}

// TestChartLibraryCronJob: the library README's CronJob, followed
// literally, renders a Job Pod whose native sidecar holds the job container
// back until it leads, runs as the chart's ServiceAccount with the token
// mounted into the sidecar alone, and never restarts the job.
func TestChartLibraryCronJob(t *testing.T) {
	r, err := sidecartest.TemplateMyChart(t, cronJobChart(t), "sidecar.waitForLeadership=true")
	if err != nil {
		t.Fatal(err)
	}
	cj := sidecartest.One[*batchv1.CronJob](t, r)
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy %s, want Forbid", cj.Spec.ConcurrencyPolicy)
	}
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	sc := sidecartest.ContainerNamed(pod.InitContainers, "leader-sidecar")
	switch {
	case sc == nil || sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways:
		t.Fatalf("no native sidecar in %+v", pod.InitContainers)
	case sc.StartupProbe == nil || sc.StartupProbe.HTTPGet == nil || sc.StartupProbe.HTTPGet.Path != "/leader/ready":
		t.Errorf("the sidecar's startup probe %+v does not wait for leadership", sc.StartupProbe)
	case sidecartest.ContainerNamed(pod.Containers, "job") == nil:
		t.Errorf("no job container in %+v", pod.Containers)
	case pod.RestartPolicy != corev1.RestartPolicyNever:
		t.Errorf("restartPolicy %s, want Never", pod.RestartPolicy)
	case pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken:
		t.Errorf("the Pod automounts a ServiceAccount token")
	case pod.ServiceAccountName != "shop-mychart":
		t.Errorf("serviceAccountName %q, want the chart's shop-mychart", pod.ServiceAccountName)
	}
	var token bool
	for _, v := range pod.Volumes {
		if v.Projected != nil {
			sidecartest.CheckTokenVolume(t, v)
			token = true
		}
	}
	if !token {
		t.Errorf("no projected token volume for the sidecar in %+v", pod.Volumes)
	}
}
