package apiserver

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

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

// serviceAccount creates a ServiceAccount "elector" bound to a Role with
// rules and returns a kubeconfig that impersonates it.
func serviceAccount(t *testing.T, k *sidecartest.KubeEnv, ns string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	return namedServiceAccount(t, k, ns, "elector", rules)
}

// namedServiceAccount is serviceAccount with a name of its own, for its
// ServiceAccount, Role and RoleBinding.
func namedServiceAccount(t *testing.T, k *sidecartest.KubeEnv, ns, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
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

// renderedShardRules are the Role rules the example chart renders for
// shard mode on the lease backend (the library's leader-sidecar-lib.rules),
// failing t unless they are the one rule the chart documents: get, list,
// watch, create and update on every Lease of the namespace, no delete, no
// Events.
func renderedShardRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	r := sidecartest.RenderChart(t, sidecartest.Charts(t), "apps", "sidecar:\n  sharding:\n    enabled: true\n")
	rules := sidecartest.One[*rbacv1.Role](t, r).Rules
	want := []string{"get", "list", "watch", "create", "update"}
	if len(rules) != 2 || !slices.Equal(rules[0].Resources, []string{"leases"}) || len(rules[0].ResourceNames) != 0 || !slices.Equal(rules[0].Verbs, want) ||
		!slices.Equal(rules[1].APIGroups, []string{"events.k8s.io"}) || !slices.Equal(rules[1].Resources, []string{"events"}) || !slices.Equal(rules[1].Verbs, []string{"create"}) {
		t.Fatalf("the chart's Role in shard mode: %+v, want one rule on leases with verbs %v and create on events.k8s.io events", rules, want)
	}
	return rules
}

// TestShardGroupWorksWithTheRenderedRole runs two sidecars in shard mode
// as a ServiceAccount bound to the Role the chart renders for shard mode,
// on a real API server: the 8 shards spread over them (Leases created,
// renewed, watched, members listed), one stops gracefully and the other
// takes every shard, and nothing was forbidden (the Events of the shards'
// terms included): the Role is sufficient.
// Then, with each of its verbs dropped in turn, a sidecar logs the
// request the API server refused, naming the verb, and keeps running:
// every verb is needed. (list is needed where the shared watch of the
// namespace cannot serve the member Leases: on an API server that cannot
// stream a watch's initial state, which a proxy in front of the sidecar
// plays, and whenever that watch is not current.)
func TestShardGroupWorksWithTheRenderedRole(t *testing.T) {
	t.Parallel()
	rules := renderedShardRules(t)
	args := append(sidecartest.ShardArgs(), "--kube-api-qps", "50", "--kube-api-burst", "100")
	t.Run("sufficient", func(t *testing.T) {
		t.Parallel()
		k := sidecartest.Kube(t)
		ns := k.Namespace(t)
		kc := serviceAccount(t, k, ns, rules)
		p := sidecartest.NewShardSampler(sidecartest.TestShards)
		var live []*sidecartest.Sidecar
		for _, pod := range []string{"app-0", "app-1"} {
			s := sidecartest.LeaseSidecar(t, kc, ns, "billing", pod, args...)
			p.Sample(s)
			live = append(live, s)
		}
		holders, tokens := p.AwaitSpread(t, live, 20*time.Second, sidecartest.AnyToken)
		leaver := live[0]
		moved := sidecartest.HeldBy(leaver, holders)
		leaver.Signal(syscall.SIGTERM)
		if code := leaver.WaitExit(15 * time.Second); code != 0 {
			t.Errorf("the leaver exited %d", code)
		}
		p.AwaitSpread(t, live[1:], 5*time.Second, sidecartest.HigherThan(moved, tokens))
		p.Check(t)
		for _, s := range live {
			if logs := s.Logs(); strings.Contains(logs, "forbidden") {
				t.Fatalf("a request was forbidden with the chart's Role:\n%s", logs)
			}
		}
	})
	for _, c := range []struct {
		verb, mention   string
		refuseStreaming bool
	}{
		{"get", `cannot get resource \"leases\"`, false},
		{"list", `cannot list resource \"leases\"`, true},
		{"watch", `cannot watch resource \"leases\"`, false},
		{"create", `cannot create resource \"leases\"`, false},
		{"update", `cannot update resource \"leases\"`, false},
	} {
		t.Run("without "+c.verb, func(t *testing.T) {
			t.Parallel()
			k := sidecartest.Kube(t)
			ns := k.Namespace(t)
			kc := serviceAccount(t, k, ns, dropVerb(rules, c.verb))
			if c.refuseStreaming {
				cfg, err := clientcmd.BuildConfigFromFlags("", kc)
				if err != nil {
					t.Fatal(err)
				}
				p := newWatchCountingProxy(t, cfg)
				p.refuseStreaming.Store(true)
				kc = p.kubeconfig(t)
			}
			s := sidecartest.LeaseSidecar(t, kc, ns, "billing", "app-0", args...)
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
