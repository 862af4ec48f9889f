package chart

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestChartPostgresBackend: with backend postgres the sidecar reads its
// connection string from a Secret (the user's, existingSecret and key; or
// one the chart renders from url), never from a plain value, and gets the
// table's settings; it needs no RBAC in readiness mode none, and no
// uninstall hook is rendered.
func TestChartPostgresBackend(t *testing.T) {
	dir := sidecartest.Charts(t)
	const fullname = sidecartest.ChartRelease + "-leader-sidecar-example"
	for _, c := range []struct {
		name, values, secret, key string
		rendered                  bool
	}{
		{"existing Secret", "sidecar:\n  backend: postgres\n  postgres:\n    existingSecret: db\n    key: dsn\n    table: leaders\n    signal: poll\n", "db", "dsn", false},
		{"url", "sidecar:\n  backend: postgres\n  postgres:\n    url: postgres://app:pw@db/orders\n    table: leaders\n    signal: poll\n", fullname + "-postgres", "url", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sidecartest.RenderChart(t, dir, "apps", c.values)
			sc := sidecarContainers(t, r)[0]
			env := sidecartest.EnvOf(&sc)
			url := env["LEADER_SIDECAR_POSTGRES_URL"]
			if url.Value != "" || url.ValueFrom == nil || url.ValueFrom.SecretKeyRef == nil ||
				url.ValueFrom.SecretKeyRef.Name != c.secret || url.ValueFrom.SecretKeyRef.Key != c.key {
				t.Fatalf("LEADER_SIDECAR_POSTGRES_URL is %+v; want it from Secret %s, key %s", url, c.secret, c.key)
			}
			if env["LEADER_SIDECAR_BACKEND"].Value != "postgres" || env["LEADER_SIDECAR_POSTGRES_TABLE"].Value != "leaders" ||
				env["LEADER_SIDECAR_POSTGRES_SIGNAL"].Value != "poll" {
				t.Fatalf("sidecar env %v", env)
			}
			secrets := sidecartest.Find[*corev1.Secret](t, r)
			switch {
			case c.rendered && (len(secrets) != 1 || secrets[0].Name != c.secret || secrets[0].StringData["url"] != "postgres://app:pw@db/orders"):
				t.Fatalf("Secrets %v; want %s holding the url", secrets, c.secret)
			case !c.rendered && len(secrets) != 0:
				t.Fatalf("Secrets %v; want none: the user's Secret is read", secrets)
			}
			if roles := sidecartest.Find[*rbacv1.Role](t, r); len(roles) != 0 {
				t.Errorf("Roles %v; the postgres backend in readiness mode none needs none", roles)
			}
			if len(r.Hooks) != 0 {
				t.Errorf("%d hooks rendered; the uninstall hook is the lease backend's", len(r.Hooks))
			}
		})
	}
}
