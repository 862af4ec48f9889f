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
// another store or record (backend, election name, sharding, the SQLite
// directory on the node, the PostgreSQL table or connection string, a
// variable in extraEnv or a flag in extraArgs) must roll out as a Recreate, since old and new Pods side
// by side would elect in two places and both lead; one that changes only
// timings, or nothing of where the election is, keeps the RollingUpdate.
func TestUpgradeThatMovesTheElectionRecreates(t *testing.T) {
	t.Parallel()
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
		{"sqlite in another node directory", "sidecar:\n  backend: sqlite\n  sqlite:\n    volume:\n      hostPath: /var/lib/orders\n", true},
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

// TestUpgradeKeepsTrustAcrossTheRollout upgrades the example chart step
// by step on the API server. A standby trusts a record's lease duration
// only up to its bound (ten times its own lease by default), so in a
// rollout each side's bound must cover the other side's lease: an upgrade
// that shortens the lease more than tenfold, or lengthens it beyond the
// running replicas' bound, fails at render with the way out, and the two
// steps it names pass.
func TestUpgradeKeepsTrustAcrossTheRollout(t *testing.T) {
	t.Parallel()
	dir := sidecartest.Charts(t)
	k := sidecartest.Kube(t)
	ns := k.Namespace(t)
	kc := k.Kubeconfig(t, "")
	chart := filepath.Join(dir, "leader-sidecar-example")
	const short = "sidecar:\n  leaseDuration: 1s\n  renewDeadline: 600ms\n  retryPeriod: 200ms\n"
	steps := []struct {
		what, values, refused string
	}{
		{"install with the default 15s lease", "", ""},
		{"15s to 1s at once", short, "Set sidecar.maxRecordLeaseDuration to at least 15s for this upgrade"},
		{"15s to 1s, trusting 15s", short + "  maxRecordLeaseDuration: 15s\n", ""},
		{"the bound unset again", short, ""},
		{"1s to 20s at once", "sidecar:\n  leaseDuration: 20s\n  renewDeadline: 12s\n", "first set sidecar.maxRecordLeaseDuration to at least 20s with the lease unchanged"},
		{"the bound first", short + "  maxRecordLeaseDuration: 20s\n", ""},
		{"then the lease", "sidecar:\n  leaseDuration: 20s\n  renewDeadline: 12s\n", ""},
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
		out, err := sidecartest.RunHelm(t, args...)
		switch {
		case s.refused == "" && err != nil:
			t.Fatalf("step %d, %s: helm %s: %v\n%s", i, s.what, args[0], err, out)
		case s.refused != "" && err == nil:
			t.Fatalf("step %d, %s: helm %s passed, want it refused with %q", i, s.what, args[0], s.refused)
		case s.refused != "" && !strings.Contains(out+err.Error(), s.refused):
			t.Fatalf("step %d, %s: helm %s refused with\n%v\n%s\nwant %q in it", i, s.what, args[0], err, out, s.refused)
		case s.refused != "":
			t.Logf("step %d, %s: refused: %v", i, s.what, err)
		}
	}
}
