package process

import (
	"strings"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

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
