package apiserver

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// resetterRules are the charts' uninstall hook's: read and write the one
// Lease, by name.
func resetterRules(lease string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		ResourceNames: []string{lease}, Verbs: []string{"get", "update"}}}
}

// resetLease runs the real binary's sidecar reset on a Lease and returns
// its exit status and output.
func resetLease(t *testing.T, kubeconfig, ns, name string, extra ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	args := append([]string{"reset", "--backend", "lease", "--kubeconfig", kubeconfig, "-n", ns, "--lease-name", name,
		"--lease-duration", sidecartest.LeaseDuration.String()}, extra...)
	cmd := exec.CommandContext(ctx, sidecartest.Binary(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

// TestResetReleasesALeaseWhoseHolderLostItsRBAC is helm uninstall on the
// API server: the sidecars' RoleBinding is deleted while they run, so the
// stopping leader cannot release and the Lease names a holder that is
// gone. sidecar reset --if-abandoned, with the uninstall hook's rights
// (get and update on that Lease only), waits out the holder's lease and
// writes the release, its token kept; a sidecar started afterwards leads
// at once (well within a lease) with the next token. A Lease its holder
// renews is left, exit 0 with --if-abandoned and 1 without.
func TestResetReleasesALeaseWhoseHolderLostItsRBAC(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "billing"
	kc := serviceAccount(t, k, ns, electorRules(name))
	resetter := namedServiceAccount(t, k, ns, "resetter", resetterRules(name))
	all := []*sidecartest.Sidecar{sidecartest.LeaseSidecar(t, kc, ns, name, "billing-0"), sidecartest.LeaseSidecar(t, kc, ns, name, "billing-1")}
	leader, token := sidecartest.AwaitLeader(t, all, 15*time.Second)
	holder := sidecartest.IdentityOf(t, leader)

	if err := k.Client.RbacV1().RoleBindings(ns).Delete(context.Background(), "elector", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		s.Signal(syscall.SIGTERM)
	}
	for _, s := range all {
		s.WaitExit(30 * time.Second)
	}
	k.LeaseShows(t, ns, name, holder, token) // the release was forbidden

	began := time.Now()
	code, out := resetLease(t, resetter, ns, name, "--if-abandoned")
	if code != 0 || !strings.Contains(out, "released at token") {
		t.Fatalf("reset --if-abandoned of the Lease of a gone holder: exit %d, %q; want 0, released", code, out)
	}
	if took := time.Since(began); took < sidecartest.LeaseDuration {
		t.Fatalf("reset released after %v, before the holder's lease of %v could pass", took, sidecartest.LeaseDuration)
	}
	rec := lease.RecordOf(k.Lease(t, ns, name))
	if !election.IsReleaseShape(rec) || rec.Transitions != token {
		t.Fatalf("after reset the Lease is %+v; want the release shape at token %d", rec, token)
	}

	if _, err := k.Client.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "elector", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "elector"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "elector", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	again := sidecartest.LeaseSidecar(t, kc, ns, name, "billing-2")
	serving := time.Now()
	_, next := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{again}, sidecartest.LeaseDuration-500*time.Millisecond)
	t.Logf("reset took %v; the reinstalled sidecar led %v after it served", time.Since(began).Round(time.Millisecond), time.Since(serving).Round(time.Millisecond))
	if next != token+1 {
		t.Fatalf("token after the reset %d, want %d", next, token+1)
	}

	// A live holder keeps its Lease.
	againHolder := sidecartest.IdentityOf(t, again)
	if code, out := resetLease(t, resetter, ns, name, "--if-abandoned"); code != 0 || !strings.Contains(out, "left as it is") {
		t.Fatalf("reset --if-abandoned of a renewed Lease: exit %d, %q; want 0, left as it is", code, out)
	}
	if code, out := resetLease(t, resetter, ns, name); code != 1 || !strings.Contains(out, againHolder) {
		t.Fatalf("reset of a renewed Lease: exit %d, %q; want 1 naming the holder", code, out)
	}
	k.LeaseShows(t, ns, name, againHolder, next)
	if _, still := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{again}, time.Second); still != next {
		t.Fatalf("the live leader's token moved from %d to %d", next, still)
	}
}
