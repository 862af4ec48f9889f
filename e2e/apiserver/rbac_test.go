package apiserver

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// electorRules is the least a sidecar needs: get, watch and update its one
// Lease by name (the watch selects the name with a field selector, which
// RBAC matches against resourceNames; client-go streams the initial state
// over the watch, so no list is needed), create Leases (RBAC cannot restrict
// create by name), and create Events.
func electorRules(lease string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			ResourceNames: []string{lease}, Verbs: []string{"get", "watch", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}},
	}
}

// dropVerb returns rules with verb removed from the Lease rules.
func dropVerb(rules []rbacv1.PolicyRule, verb string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		var verbs []string
		for _, v := range r.Verbs {
			if v != verb || r.Resources[0] != "leases" {
				verbs = append(verbs, v)
			}
		}
		if len(verbs) > 0 {
			r.Verbs = verbs
			out = append(out, r)
		}
	}
	return out
}

// serviceAccount creates a ServiceAccount bound to a Role with rules and
// returns a kubeconfig that impersonates it.
func serviceAccount(t *testing.T, k *sidecartest.KubeEnv, ns string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	const name = "elector"
	meta := metav1.ObjectMeta{Name: name, Namespace: ns}
	if _, err := k.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}
	if _, err := k.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return k.Kubeconfig(t, "system:serviceaccount:"+ns+":"+name)
}

func TestLeaseWorksWithLeastPrivilege(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "least"
	kc := serviceAccount(t, k, ns, electorRules(name))
	all := []*sidecartest.Sidecar{sidecartest.LeaseSidecar(t, kc, ns, name, "app-0"), sidecartest.LeaseSidecar(t, kc, ns, name, "app-1")}
	leader, token := sidecartest.AwaitLeader(t, all, 15*time.Second)
	k.LeaseShows(t, ns, name, sidecartest.IdentityOf(t, leader), token)

	// Renewals keep working (update), and a release reaches the standby at
	// once (watch).
	time.Sleep(2 * sidecartest.RenewDeadline)
	if _, again := sidecartest.AwaitLeader(t, all, time.Second); again != token {
		t.Fatalf("token moved from %d to %d without a fault", token, again)
	}
	resp, err := sidecartest.Client.Post("http://"+leader.Addr()+"/leader/release", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, next := sidecartest.AwaitLeader(t, sidecartest.Without(all, leader), time.Second); next != token+1 {
		t.Fatalf("token after release %d, want %d", next, token+1)
	}
	for _, s := range all {
		if logs := s.Logs(); strings.Contains(logs, "forbidden") {
			t.Fatalf("a request was forbidden with the least-privilege Role:\n%s", logs)
		}
	}
}

func TestLeaseMissingPermissionIsNamed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		verb    string
		mention string
	}{
		{"create", `cannot create resource \"leases\"`},
		{"get", `cannot get resource \"leases\"`},
		{"update", `cannot update resource \"leases\"`},
		// Without watch, client-go's streaming watch fails and it falls back
		// to a list, which the error then names (the README says so).
		{"watch", `cannot list resource \"leases\"`},
	}
	for _, c := range cases {
		t.Run(c.verb, func(t *testing.T) {
			k := sidecartest.Kube(t)
			ns, name := k.Namespace(t), "lacking"
			kc := serviceAccount(t, k, ns, dropVerb(electorRules(name), c.verb))
			s := sidecartest.LeaseSidecar(t, kc, ns, name, "app-0")
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(s.Logs(), c.mention) {
				if time.Now().After(deadline) {
					t.Fatalf("no log line saying %s within 20s", c.mention)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !s.Alive() {
				t.Fatal("a missing permission crashed the sidecar")
			}
		})
	}
}

func TestLeaseElectionDoesNotNeedEvents(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "no-events"
	kc := serviceAccount(t, k, ns, electorRules(name)[:2])
	s := sidecartest.LeaseSidecar(t, kc, ns, name, "app-0")
	_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 15*time.Second)
	time.Sleep(2 * sidecartest.RenewDeadline)
	if _, again := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, time.Second); again != token {
		t.Fatalf("token moved from %d to %d", token, again)
	}
}
