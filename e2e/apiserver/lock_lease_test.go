package apiserver

import (
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// Two sidecar lock runs on one Lease of a real API server take turns as
// on SQLite. One finds the API server through --kubeconfig, the other
// through $KUBECONFIG alone. Once both have exited, the Lease is released
// with the last run's token.
func TestLockRunsTakeTurnsOnALease(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "nightly-job"
	kc := k.Kubeconfig(t, "")
	lease := []string{"--backend", "lease", "--namespace", ns, "--lease-name", name}
	entries := runsInTurn(t, []lockRun{
		{args: append([]string{"--kubeconfig", kc}, lease...)},
		{env: []string{"KUBECONFIG=" + kc}, args: lease},
	})
	spec := k.Lease(t, ns, name).Spec
	last := entries[len(entries)-1].Token
	if (spec.HolderIdentity != nil && *spec.HolderIdentity != "") || spec.LeaseTransitions == nil || int64(*spec.LeaseTransitions) != last {
		t.Fatalf("Lease holder %v, transitions %v; want released with token %d", sidecartest.Deref(spec.HolderIdentity), sidecartest.Deref(spec.LeaseTransitions), last)
	}
}
