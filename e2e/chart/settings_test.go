package chart

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The settings of the sidecar and the app, one test each, as the example
// chart and a chart made by `helm create` with the library render them:
// each setting reaches the container as the variable or flag the sidecar
// reads, and a value the sidecar would refuse fails the render, naming it.

// TestChartNativeSidecarNeedsKubernetes129: the charts install on 1.25 and
// later (kubeVersion), and a native sidecar, the default, fails the render
// below 1.29 naming sidecar.native, while native false renders there.
func TestChartNativeSidecarNeedsKubernetes129(t *testing.T) {
	for _, chart := range []string{"leader-sidecar-lib", "leader-sidecar-example"} {
		if got := sidecartest.ReadChartMeta(t, chart).KubeVersion; got != ">=1.25.0-0" {
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

// TestChartWaitForLeadership renders sidecar.waitForLeadership: the native
// sidecar's startup probe asks /leader/ready without giving up, and the
// Deployment is recreated, never rolled (a new Pod could not become
// available while an old one leads). Off, the startup probe asks /healthz.
func TestChartWaitForLeadership(t *testing.T) {
	dir := sidecartest.Charts(t)
	probe := func(values string) (*corev1.Probe, appsv1.DeploymentStrategyType) {
		dep := sidecartest.One[*appsv1.Deployment](t, sidecartest.RenderChart(t, dir, "apps", values))
		c := sidecartest.ContainerNamed(dep.Spec.Template.Spec.InitContainers, "leader-sidecar")
		if c == nil || c.StartupProbe == nil || c.StartupProbe.HTTPGet == nil {
			t.Fatalf("no native sidecar with an HTTP startup probe in %+v", dep.Spec.Template.Spec.InitContainers)
		}
		return c.StartupProbe, dep.Spec.Strategy.Type
	}

	p, strategy := probe("sidecar:\n  waitForLeadership: true\n")
	if p.HTTPGet.Path != "/leader/ready" || p.FailureThreshold != 2147483647 {
		t.Errorf("startup probe %s, failureThreshold %d; want /leader/ready, never giving up", p.HTTPGet.Path, p.FailureThreshold)
	}
	if strategy != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %s, want Recreate", strategy)
	}

	p, strategy = probe("")
	if p.HTTPGet.Path != "/healthz" || p.FailureThreshold != 60 {
		t.Errorf("default startup probe %s, failureThreshold %d; want /healthz, 60", p.HTTPGet.Path, p.FailureThreshold)
	}
	if strategy != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("default strategy %s, want RollingUpdate", strategy)
	}

	_, err := sidecartest.TemplateChart(t, dir, "apps", "sidecar:\n  waitForLeadership: true\n  native: false\n")
	if want := "sidecar.waitForLeadership needs sidecar.native true"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("waitForLeadership without a native sidecar: want an error with %q, got %v", want, err)
	}
}

// sidecar.renewInterval: empty leaves the sidecar its default (a third of
// the lease duration), a duration is passed on as
// LEADER_SIDECAR_RENEW_INTERVAL, and one the sidecar would refuse fails
// the render naming the value, in a helm create chart (the library's own
// checks) and in the example chart (its schema, then the library).
func TestChartRenewInterval(t *testing.T) {
	chart := sidecartest.HelmCreateWithLibrary(t)
	renewEnv := func(t *testing.T, r *sidecartest.Rendered) (corev1.EnvVar, bool) {
		t.Helper()
		pod := sidecartest.One[*appsv1.Deployment](t, r).Spec.Template.Spec
		sc := sidecartest.ContainerNamed(append(pod.InitContainers, pod.Containers...), "leader-sidecar")
		if sc == nil {
			t.Fatal("no leader-sidecar container")
		}
		e, ok := sidecartest.EnvOf(sc)["LEADER_SIDECAR_RENEW_INTERVAL"]
		return e, ok
	}

	r, err := sidecartest.TemplateMyChart(t, chart)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := renewEnv(t, r); ok {
		t.Fatalf("LEADER_SIDECAR_RENEW_INTERVAL = %q by default, want it unset (the sidecar's lease-duration / 3)", e.Value)
	}
	for _, set := range [][]string{
		{"sidecar.renewInterval=3s"},
		{"sidecar.renewInterval=7599ms"}, // 10s - 1.2 x 2s - 1ms
		{"sidecar.leaseDuration=3s", "sidecar.renewDeadline=2s", "sidecar.retryPeriod=500ms", "sidecar.renewInterval=1s"},
	} {
		r, err := sidecartest.TemplateMyChart(t, chart, set...)
		if err != nil {
			t.Fatalf("%v: %v", set, err)
		}
		want := strings.TrimPrefix(set[len(set)-1], "sidecar.renewInterval=")
		if e, ok := renewEnv(t, r); !ok || e.Value != want {
			t.Fatalf("%v: LEADER_SIDECAR_RENEW_INTERVAL = %q (set %v), want %q", set, e.Value, ok, want)
		}
	}

	for _, c := range []struct {
		name string
		set  []string
		want string
	}{
		{"zero", []string{"sidecar.renewInterval=0s"}, "sidecar.renewInterval must be greater than 0, not 0s"},
		{"not a duration", []string{"sidecar.renewInterval=often"}, "sidecar.renewInterval must be a duration such as 15s or 1m30s, not often"},
		{"no room for a retry", []string{"sidecar.renewInterval=7600ms"},
			"sidecar.renewInterval (7600ms) must be less than sidecar.renewDeadline (10s) minus 1.2 x sidecar.retryPeriod (2s), so a failed renewal is retried before the leader stops claiming"},
		{"no room with short timings", []string{"sidecar.leaseDuration=3s", "sidecar.renewDeadline=2s", "sidecar.retryPeriod=500ms", "sidecar.renewInterval=1500ms"},
			"sidecar.renewInterval (1500ms) must be less than sidecar.renewDeadline (2s) minus 1.2 x sidecar.retryPeriod (500ms)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := sidecartest.TemplateMyChart(t, chart, c.set...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v: want an error with %q, got %v", c.set, c.want, err)
			}
		})
	}

	dir := sidecartest.Charts(t)
	if _, err := sidecartest.TemplateChart(t, dir, "apps", "sidecar:\n  renewInterval: 8s\n"); err == nil ||
		!strings.Contains(err.Error(), "sidecar.renewInterval (8s) must be less than sidecar.renewDeadline (10s)") {
		t.Fatalf("the example chart rendered a renew interval without room for a retry, or did not name it: %v", err)
	}
	if _, err := sidecartest.TemplateChart(t, dir, "apps", "sidecar:\n  renewInterval: 5\n"); err == nil ||
		!strings.Contains(err.Error(), "renewInterval") {
		t.Fatalf("the example chart's schema let a number through as renewInterval: %v", err)
	}
	r = sidecartest.RenderChart(t, dir, "apps", "sidecar:\n  renewInterval: 4s\n")
	if e, ok := renewEnv(t, r); !ok || e.Value != "4s" {
		t.Fatalf("the example chart: LEADER_SIDECAR_RENEW_INTERVAL = %q (set %v), want 4s", e.Value, ok)
	}
}

// TestChartAppHealth: sidecar.appHealth passes the app's health check to the sidecar, each
// setting as the variable the binary reads, and the library refuses what
// the sidecar would refuse or what could never work.
func TestChartAppHealth(t *testing.T) {
	dir := sidecartest.Charts(t)
	known := sidecarEnvNames(t)
	dep := sidecartest.One[*appsv1.Deployment](t, sidecartest.RenderChart(t, dir, "apps",
		"sidecar:\n  appHealth:\n    url: http://127.0.0.1:8080/healthz\n    period: 5s\n    failures: 2\n"))
	env := sidecartest.EnvOf(sidecartest.ContainerNamed(dep.Spec.Template.Spec.InitContainers, "leader-sidecar"))
	for name, want := range map[string]string{
		"LEADER_SIDECAR_APP_HEALTH_URL": "http://127.0.0.1:8080/healthz", "LEADER_SIDECAR_APP_HEALTH_PERIOD": "5s",
		"LEADER_SIDECAR_APP_HEALTH_FAILURES": "2", "LEADER_SIDECAR_APP_HEALTH_TIMEOUT": "1s",
	} {
		if !known[name] || env[name].Value != want {
			t.Errorf("%s=%q (known to the sidecar: %v), want %q", name, env[name].Value, known[name], want)
		}
	}
	dep = sidecartest.One[*appsv1.Deployment](t, sidecartest.RenderChart(t, dir, "apps", ""))
	for name := range sidecartest.EnvOf(sidecartest.ContainerNamed(dep.Spec.Template.Spec.InitContainers, "leader-sidecar")) {
		if strings.HasPrefix(name, "LEADER_SIDECAR_APP_HEALTH_") {
			t.Errorf("%s set without sidecar.appHealth.url", name)
		}
	}

	chart := sidecartest.HelmCreateWithLibrary(t)
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"sidecar.appHealth.url=http://10.0.0.7:8080/healthz"}, "sidecar.appHealth.url must be an http:// or https:// URL on loopback"},
		{[]string{"sidecar.appHealth.url=127.0.0.1:8080"}, "sidecar.appHealth.url must be an http:// or https:// URL on loopback"},
		{[]string{"sidecar.appHealth.url=http://localhost:8080/", "sidecar.waitForLeadership=true"}, "sidecar.appHealth.url and sidecar.waitForLeadership exclude each other"},
		{[]string{"sidecar.appHealth.url=http://[::1]:8080/", "sidecar.appHealth.failures=0"}, "sidecar.appHealth.failures must be a whole number of at least 1"},
		{[]string{"sidecar.appHealth.url=http://127.0.0.1:8080/", "sidecar.appHealth.period=0s"}, "sidecar.appHealth.period must be greater than 0"},
	} {
		if _, err := sidecartest.TemplateMyChart(t, chart, c.set...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: want an error with %q, got %v", c.set, c.want, err)
		}
	}
}

// podIDs is every uid, gid and fsGroup the Pod spec sets, by where.
func podIDs(pod corev1.PodSpec) map[string]int64 {
	ids := map[string]int64{}
	if sc := pod.SecurityContext; sc != nil {
		for name, v := range map[string]*int64{"pod runAsUser": sc.RunAsUser, "pod runAsGroup": sc.RunAsGroup, "pod fsGroup": sc.FSGroup} {
			if v != nil {
				ids[name] = *v
			}
		}
	}
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		if sc := c.SecurityContext; sc != nil {
			for name, v := range map[string]*int64{"runAsUser": sc.RunAsUser, "runAsGroup": sc.RunAsGroup} {
				if v != nil {
					ids[c.Name+" "+name] = *v
				}
			}
		}
	}
	return ids
}

func sidecarOf(t *testing.T, pod corev1.PodSpec) *corev1.Container {
	t.Helper()
	sc := sidecartest.ContainerNamed(slices.Concat(pod.InitContainers, pod.Containers), "leader-sidecar")
	if sc == nil {
		t.Fatal("no sidecar container")
	}
	return sc
}

// TestChartSidecarSecurityContext: the sidecar's user and group are 65532
// by default, another number, or none at all (null), which platforms that
// assign UIDs need (OpenShift's restricted-v2 refuses a fixed one); and its
// exit message is in the Pod's status (terminationMessagePolicy
// FallbackToLogsOnError).
func TestChartSidecarSecurityContext(t *testing.T) {
	dir := sidecartest.Charts(t)
	example := func(t *testing.T, values string) corev1.PodSpec {
		t.Helper()
		return sidecartest.One[*appsv1.Deployment](t, sidecartest.RenderChart(t, dir, "apps", values)).Spec.Template.Spec
	}
	mychart := sidecartest.HelmCreateWithLibrary(t)
	helmCreate := func(t *testing.T, set ...string) corev1.PodSpec {
		t.Helper()
		r, err := sidecartest.TemplateMyChart(t, mychart, set...)
		if err != nil {
			t.Fatal(err)
		}
		return sidecartest.One[*appsv1.Deployment](t, r).Spec.Template.Spec
	}

	t.Run("defaults", func(t *testing.T) {
		for name, pod := range map[string]corev1.PodSpec{"example": example(t, ""), "helm create": helmCreate(t)} {
			sc := sidecarOf(t, pod)
			ids := podIDs(pod)
			if ids["leader-sidecar runAsUser"] != 65532 || ids["leader-sidecar runAsGroup"] != 65532 {
				t.Errorf("%s: sidecar ids %v, want 65532", name, ids)
			}
			if sc.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
				t.Errorf("%s: terminationMessagePolicy %q, want FallbackToLogsOnError", name, sc.TerminationMessagePolicy)
			}
		}
		if ids := podIDs(example(t, "")); ids["pod fsGroup"] != 65532 || ids["app runAsUser"] != 65532 {
			t.Errorf("example: ids %v, want 65532 for the Pod and the app", ids)
		}
	})
	t.Run("other ids", func(t *testing.T) {
		pod := example(t, "sidecar:\n  securityContext:\n    runAsUser: 1000650000\n    runAsGroup: 0\n    fsGroup: 1000650000\n")
		ids := podIDs(pod)
		for where, want := range map[string]int64{"leader-sidecar runAsUser": 1000650000, "leader-sidecar runAsGroup": 0, "app runAsUser": 1000650000, "pod fsGroup": 1000650000} {
			if got, ok := ids[where]; !ok || got != want {
				t.Errorf("%s: %d (set %t), want %d", where, got, ok, want)
			}
		}
	})
	t.Run("none: the platform assigns them", func(t *testing.T) {
		none := "sidecar:\n  securityContext:\n    runAsUser: null\n    runAsGroup: null\n    fsGroup: null\n"
		for name, pod := range map[string]corev1.PodSpec{
			"example, values file": example(t, none),
			"helm create, --set":   helmCreate(t, "sidecar.securityContext.runAsUser=null", "sidecar.securityContext.runAsGroup=null"),
		} {
			if ids := podIDs(pod); len(ids) != 0 {
				t.Errorf("%s: ids %v, want none", name, ids)
			}
			if sc := sidecarOf(t, pod).SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s: the rest of the sidecar's securityContext went too: %+v", name, sc)
			}
		}
	})
	t.Run("bad values", func(t *testing.T) {
		if _, err := sidecartest.TemplateMyChart(t, mychart, "sidecar.securityContext.runAsUser=root"); err == nil ||
			!strings.Contains(err.Error(), `sidecar.securityContext.runAsUser must be a uid (a whole number from 0) or null, not "root"`) {
			t.Errorf("runAsUser root: %v", err)
		}
		if _, err := sidecartest.TemplateMyChart(t, mychart, "sidecar.securityContext.runAsGroup=-1"); err == nil ||
			!strings.Contains(err.Error(), `sidecar.securityContext.runAsGroup must be a gid (a whole number from 0) or null, not -1`) {
			t.Errorf("runAsGroup -1: %v", err)
		}
		if _, err := sidecartest.TemplateChart(t, dir, "apps", "sidecar:\n  securityContext:\n    runAsUser: root\n"); err == nil ||
			!strings.Contains(err.Error(), "/sidecar/securityContext/runAsUser") {
			t.Errorf("the example's schema let runAsUser root through: %v", err)
		}
	})
}

// TestChartImageDigest: an image digest pins the sidecar's and the app's
// image (repository@digest), in the example chart and a helm create chart,
// and a malformed one is refused.
func TestChartImageDigest(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	r, _ := sidecartest.ExampleExtras(t, sidecartest.Charts(t), "sidecar:\n  image:\n    digest: "+digest+"\napp:\n  image:\n    digest: "+digest+"\n")
	images := imagesOf(sidecartest.One[*appsv1.Deployment](t, r).Spec.Template.Spec)
	if images["leader-sidecar"] != sidecartest.SidecarImageRepository+"@"+digest || images["app"] != sidecartest.AppImageRepository+"@"+digest {
		t.Fatalf("images %v, want repository@%s", images, digest)
	}
	chart := sidecartest.HelmCreateWithExtras(t)
	lib, err := sidecartest.TemplateMyChart(t, chart, "sidecar.image.digest="+digest)
	if err != nil {
		t.Fatal(err)
	}
	if got := imagesOf(sidecartest.One[*appsv1.Deployment](t, lib).Spec.Template.Spec)["leader-sidecar"]; got != sidecartest.SidecarImageRepository+"@"+digest {
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

// TestChartAppDataVolume renders app.dataVolume: an emptyDir by default,
// or the one volume source given (here a claim every replica mounts).
func TestChartAppDataVolume(t *testing.T) {
	dir := sidecartest.Charts(t)
	volume := func(values string) corev1.Volume {
		pod := sidecartest.One[*appsv1.Deployment](t, sidecartest.RenderChart(t, dir, "apps", values)).Spec.Template.Spec
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "app-data" })
		if i < 0 {
			t.Fatalf("no volume app-data in %+v", pod.Volumes)
		}
		return pod.Volumes[i]
	}
	if v := volume(""); v.EmptyDir == nil {
		t.Errorf("default app-data %+v, want an emptyDir", v.VolumeSource)
	}
	v := volume("app:\n  dataVolume:\n    persistentVolumeClaim:\n      claimName: shared\n")
	if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "shared" || v.EmptyDir != nil {
		t.Errorf("app-data %+v, want only the claim shared", v.VolumeSource)
	}
	if _, err := sidecartest.TemplateChart(t, dir, "apps", "app:\n  dataVolume:\n    emptyDir: {}\n    hostPath: {path: /srv}\n"); err == nil {
		t.Errorf("an app.dataVolume with two sources rendered; the schema should refuse it")
	}
}
