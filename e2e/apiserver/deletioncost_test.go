package apiserver

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// costPods are the Pods of ns carrying the leader's deletion cost.
func costPods(t *testing.T, k *sidecartest.KubeEnv, ns string) []string {
	return k.MarkedPods(t, ns, "deletion-cost")
}

// awaitCostOn waits until the leader's deletion cost is on exactly want.
func awaitCostOn(t *testing.T, k *sidecartest.KubeEnv, ns, want string) {
	t.Helper()
	deadline := time.Now().Add(3 * sidecartest.LeaseDuration)
	for {
		got := costPods(t, k, ns)
		if slices.Equal(got, []string{want}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deletion cost is on Pods %v, want only %s", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// By default the leader's Pod, and only it, carries the deletion cost; it
// follows leadership on a graceful stop; --pod-deletion-cost=false keeps
// it off.
func TestLeadersPodCarriesTheDeletionCost(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "cost"
	kc := k.Kubeconfig(t, "")
	pods := map[*sidecartest.Sidecar]string{}
	var all []*sidecartest.Sidecar
	for _, pod := range []string{"app-0", "app-1", "app-2"} {
		uid := k.CreatePod(t, ns, pod)
		s := sidecartest.Spawn(t, []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + ns, "POD_UID=" + uid},
			"--backend", "lease", "--kubeconfig", kc, "--lease-name", name)
		s.WaitServing()
		pods[s] = pod
		all = append(all, s)
	}
	first, _ := sidecartest.AwaitLeader(t, all, 15*time.Second)
	awaitCostOn(t, k, ns, pods[first])

	first.Signal(syscall.SIGTERM)
	rest := sidecartest.Without(all, first)
	second, _ := sidecartest.AwaitLeader(t, rest, sidecartest.LeaseDuration)
	if code := first.WaitExit(10 * time.Second); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	awaitCostOn(t, k, ns, pods[second]) // and off the stopped leader's Pod

	t.Run("off", func(t *testing.T) {
		ns := k.Namespace(t)
		uid := k.CreatePod(t, ns, "app-0")
		s := sidecartest.Spawn(t, []string{"POD_NAME=app-0", "POD_NAMESPACE=" + ns, "POD_UID=" + uid},
			"--backend", "lease", "--kubeconfig", kc, "--lease-name", name, "--pod-deletion-cost=false")
		s.WaitServing()
		sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 15*time.Second)
		time.Sleep(time.Second)
		if got := costPods(t, k, ns); len(got) != 0 {
			t.Fatalf("--pod-deletion-cost=false: the cost is on %v", got)
		}
	})
}

// A Role without pods (the least a Lease needs) leaves the deletion cost
// off: the sidecar says so once and leads as ever.
func TestDeletionCostWithoutRBACIsQuiet(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "cost-rbac"
	kc := serviceAccount(t, k, ns, electorRules(name))
	uid := k.CreatePod(t, ns, "app-0")
	s := sidecartest.Spawn(t, []string{"POD_NAME=app-0", "POD_NAMESPACE=" + ns, "POD_UID=" + uid},
		"--backend", "lease", "--kubeconfig", kc, "--lease-name", name)
	s.WaitServing()
	sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 15*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.Logs(), "RBAC does not let") {
		if time.Now().After(deadline) {
			t.Fatalf("no word of the refused deletion cost in the logs:\n%s", s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Signal(syscall.SIGTERM)
	if code := s.WaitExit(10 * time.Second); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	if n := strings.Count(s.Logs(), "RBAC does not let"); n != 1 {
		t.Fatalf("the refusal was logged %d times, want once:\n%s", n, s.Logs())
	}
	if got := costPods(t, k, ns); len(got) != 0 {
		t.Fatalf("the cost is on %v", got)
	}
}

// With get and patch on pods (the chart's Role when the cost is on) a
// ServiceAccount's sidecar keeps the cost.
func TestDeletionCostWithTheChartsRule(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "cost-rule"
	rules := append(electorRules(name), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}})
	kc := serviceAccount(t, k, ns, rules)
	uid := k.CreatePod(t, ns, "app-0")
	s := sidecartest.Spawn(t, []string{"POD_NAME=app-0", "POD_NAMESPACE=" + ns, "POD_UID=" + uid},
		"--backend", "lease", "--kubeconfig", kc, "--lease-name", name)
	s.WaitServing()
	sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 15*time.Second)
	awaitCostOn(t, k, ns, "app-0")
}

// On a Lease, as on SQLite (e2e/process/rollout_test.go): a SIGTERMed
// leader hands off to the standby of the other revision, with the next
// token, and the leader's deletion cost moves with it; the replicas are
// swept every 10ms and never two lead.
func TestStoppingLeaderHandsToTheOtherRevisionOnALease(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "rollout"
	kc := k.Kubeconfig(t, "")
	var set sidecartest.Members
	revision := map[*sidecartest.Sidecar]string{}
	pods := map[*sidecartest.Sidecar]string{}
	launch := func(pod, rev string) *sidecartest.Sidecar {
		uid := k.CreatePod(t, ns, pod)
		s := sidecartest.Spawn(t, []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + ns, "POD_UID=" + uid, "POD_TEMPLATE_HASH=" + rev},
			"--backend", "lease", "--kubeconfig", kc, "--lease-name", name)
		s.WaitServing()
		set.Add(pod, s, 0)
		revision[s], pods[s] = rev, pod
		return s
	}
	leader := launch("old-0", "old")
	_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{leader}, 15*time.Second)
	live := []*sidecartest.Sidecar{leader, launch("old-1", "old"), launch("new-2", "new")}
	sidecartest.AwaitSettled(t, live, leader)
	log := &sidecartest.ClaimLog{}
	halt := log.SweepUntilHalted(sidecartest.SweepEvery, set.All)
	defer halt()
	time.Sleep(200 * time.Millisecond) // the sweeps see the first term

	for round, replacement := range []string{"new-3", "old-4"} {
		standbys := sidecartest.Without(live, leader)
		leader.Signal(syscall.SIGTERM)
		next, nextToken := sidecartest.AwaitLeader(t, standbys, sidecartest.LeaseDuration)
		if revision[next] == revision[leader] || nextToken != token+1 {
			t.Fatalf("round %d: the leader of revision %s stopped and %s leads with token %d; want the standby of the other revision with token %d",
				round, revision[leader], pods[next], nextToken, token+1)
		}
		if code := leader.WaitExit(10 * time.Second); code != 0 {
			t.Fatalf("round %d: the stopped leader exited %d", round, code)
		}
		awaitCostOn(t, k, ns, pods[next])
		leader, token = next, nextToken
		live = append(standbys, launch(replacement, revision[next]))
		sidecartest.AwaitSettled(t, live, leader)
	}
	halt()
	var names []string
	for _, m := range set.All() {
		if slices.Contains(live, m.Sidecar) {
			names = append(names, m.Name)
		}
	}
	if errs := log.Failed(names...); len(errs) > 0 {
		t.Fatalf("live sidecars did not answer: %v", errs)
	}
	if terms := log.Check(t); len(terms) != 3 {
		t.Fatalf("the sweeps saw terms %v, want 3", terms)
	}
}
