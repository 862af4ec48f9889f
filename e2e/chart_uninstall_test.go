package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestChartLeaseSurvivesUninstall installs the example chart with
// sidecar.lease.create on the API server with a real helm, moves the Lease
// on as a few terms would, uninstalls, and checks that the Lease and its
// token are still there; then installs the same release again, which must
// adopt the kept Lease rather than fail or reset it.
func TestChartLeaseSurvivesUninstall(t *testing.T) {
	dir := charts(t)
	k := kube(t)
	ctx := context.Background()
	ns := k.namespace(t)
	kc := k.kubeconfig(t, "")
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("sidecar:\n  lease:\n    create: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(dir, "leader-sidecar-example")
	helmIn := func(args ...string) {
		t.Helper()
		if _, err := runHelm(t, append(args, "--namespace", ns, "--kubeconfig", kc)...); err != nil {
			t.Fatal(err)
		}
	}
	const name = chartRelease + "-leader-sidecar-example"
	const token = 7

	helmIn("install", chartRelease, chart, "--values", values)
	leases := k.client.CoordinationV1().Leases(ns)
	l := k.lease(t, ns, name)
	l.Spec.HolderIdentity = ptr.To("demo-0_x")
	l.Spec.LeaseDurationSeconds = ptr.To[int32](15)
	l.Spec.LeaseTransitions = ptr.To[int32](token)
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	helmIn("uninstall", chartRelease)
	if _, err := k.client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		t.Fatal("helm uninstall left the Deployment: the check below would prove nothing")
	}
	if l := k.lease(t, ns, name); l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != token {
		t.Fatalf("after helm uninstall the Lease's token is %v, want %d", l.Spec.LeaseTransitions, token)
	}

	helmIn("install", chartRelease, chart, "--values", values)
	if l := k.lease(t, ns, name); l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != token {
		t.Fatalf("after installing again the Lease's token is %v, want %d", l.Spec.LeaseTransitions, token)
	}
}
