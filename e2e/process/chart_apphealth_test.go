package process

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// sidecar.appHealth passes the app's health check to the sidecar, each
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
