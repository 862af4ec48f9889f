package chart

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestUpgradeThatMovesTheElectionRecreates upgrades the example chart
// with a real helm on the API server, step by step, and reads the
// Deployment's strategy after each: an upgrade that moves the election to
// another store or record (backend, election name, sharding, the
// PostgreSQL table or connection string, a variable in extraEnv or a flag
// in extraArgs) must roll out as a Recreate, since old and new Pods side
// by side would elect in two places and both lead; one that changes only
// timings, or nothing of where the election is, keeps the RollingUpdate.
func TestUpgradeThatMovesTheElectionRecreates(t *testing.T) {
	dir := sidecartest.Charts(t)
	k := sidecartest.Kube(t)
	ctx := context.Background()
	ns := k.Namespace(t)
	kc := k.Kubeconfig(t, "")
	chart := filepath.Join(dir, "leader-sidecar-example")
	const name = sidecartest.ChartRelease + "-leader-sidecar-example"
	steps := []struct {
		what, values string
		recreate     bool
	}{
		{"install on Leases", "", false},
		{"longer lease", "sidecar:\n  leaseDuration: 20s\n  renewDeadline: 12s\n", false},
		{"lease to sqlite", "sidecar:\n  backend: sqlite\n", true},
		{"sqlite with another log level", "sidecar:\n  backend: sqlite\n  logLevel: debug\n", false},
		{"sqlite back to lease", "", true},
		{"another election name", "sidecar:\n  leaseName: orders-leader\n", true},
		{"the name set again in extraEnv", "sidecar:\n  leaseName: orders-leader\n  extraEnv:\n    - name: LEADER_SIDECAR_LEASE_NAME\n      value: billing\n", true},
		{"the name set again in extraArgs", "sidecar:\n  leaseName: orders-leader\n  extraArgs: [--lease-name, billing-2]\n", true},
		{"same as extraArgs", "sidecar:\n  leaseName: orders-leader\n  extraArgs: [--lease-name=billing-2]\n", false},
		{"shard mode", "sidecar:\n  sharding:\n    enabled: true\n    shards: 4\n", true},
		{"another shard count", "sidecar:\n  sharding:\n    enabled: true\n    shards: 8\n", false},
		{"postgres", "sidecar:\n  backend: postgres\n  postgres:\n    url: postgres://app:s3cret@db-a/app\n", true},
		{"another database", "sidecar:\n  backend: postgres\n  postgres:\n    url: postgres://app:s3cret@db-b/app\n", true},
		{"same database, shorter retry", "sidecar:\n  backend: postgres\n  retryPeriod: 1s\n  postgres:\n    url: postgres://app:s3cret@db-b/app\n", false},
		{"another table", "sidecar:\n  backend: postgres\n  postgres:\n    url: postgres://app:s3cret@db-b/app\n    table: leaders_v2\n", true},
	}
	for i, s := range steps {
		values := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(values, []byte(s.values), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"upgrade", "--reset-values"}
		if i == 0 {
			args = []string{"install"}
		}
		args = append(args, sidecartest.ChartRelease, chart, "--values", values, "--namespace", ns, "--kubeconfig", kc)
		if out, err := sidecartest.RunHelm(t, args...); err != nil {
			t.Fatalf("%s: helm %s: %v\n%s", s.what, args[0], err, out)
		}
		d, err := k.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := appsv1.RollingUpdateDeploymentStrategyType
		if s.recreate {
			want = appsv1.RecreateDeploymentStrategyType
		}
		if d.Spec.Strategy.Type != want {
			t.Errorf("step %d, %s: the Deployment's strategy is %s, want %s", i, s.what, d.Spec.Strategy.Type, want)
		}
		manifest, err := sidecartest.RunHelm(t, "get", "manifest", sidecartest.ChartRelease, "--namespace", ns, "--kubeconfig", kc)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := strings.Index(manifest, "strategy:"), strings.Index(manifest, "selector:"); a >= 0 && b > a && strings.Contains(manifest[a:b], "s3cret") {
			t.Errorf("step %d, %s: the strategy's comment shows the password:\n%s", i, s.what, manifest[a:b])
		}
	}
}
