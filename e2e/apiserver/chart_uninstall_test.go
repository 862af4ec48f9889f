package apiserver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestChartLeaseSurvivesUninstall installs the example chart with
// sidecar.lease.create on the API server with a real helm, moves the Lease
// on as a few terms would, uninstalls, and checks that the Lease and its
// token are still there; then installs the same release again, which must
// adopt the kept Lease rather than fail or reset it.
func TestChartLeaseSurvivesUninstall(t *testing.T) {
	dir := sidecartest.Charts(t)
	k := sidecartest.Kube(t)
	ctx := context.Background()
	ns := k.Namespace(t)
	kc := k.Kubeconfig(t, "")
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("sidecar:\n  lease:\n    create: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(dir, "leader-sidecar-example")
	helmIn := func(args ...string) {
		t.Helper()
		if _, err := sidecartest.RunHelm(t, append(args, "--namespace", ns, "--kubeconfig", kc)...); err != nil {
			t.Fatal(err)
		}
	}
	const name = sidecartest.ChartRelease + "-leader-sidecar-example"
	const token = 7

	helmIn("install", sidecartest.ChartRelease, chart, "--values", values)
	leases := k.Client.CoordinationV1().Leases(ns)
	l := k.Lease(t, ns, name)
	l.Spec.HolderIdentity = ptr.To("demo-0_x")
	l.Spec.LeaseDurationSeconds = ptr.To[int32](15)
	l.Spec.LeaseTransitions = ptr.To[int32](token)
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	helmIn("uninstall", sidecartest.ChartRelease)
	if _, err := k.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		t.Fatal("helm uninstall left the Deployment: the check below would prove nothing")
	}
	if l := k.Lease(t, ns, name); l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != token {
		t.Fatalf("after helm uninstall the Lease's token is %v, want %d", l.Spec.LeaseTransitions, token)
	}

	helmIn("install", sidecartest.ChartRelease, chart, "--values", values)
	if l := k.Lease(t, ns, name); l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != token {
		t.Fatalf("after installing again the Lease's token is %v, want %d", l.Spec.LeaseTransitions, token)
	}
}
