//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestRolloutMovesLeadershipOnce rolls out the example chart's three
// replicas (readiness mode none) twice under each RollingUpdate shape of
// its Deployment, the default (maxSurge 25%, maxUnavailable 25%) and
// maxSurge 0 / maxUnavailable 1, and twice as a StatefulSet of the same
// Pod template. The leader's Pod carries the deletion cost, so a
// Deployment removes it last, and on SIGTERM it hands off to a Pod of the
// new revision: every Deployment rollout moves leadership exactly once
// (the token rises by one; each move of a term raises it). A StatefulSet
// ignores the deletion cost and replaces its Pods from the highest ordinal
// down, so there the successor's revision alone does it: one move, or two
// when the leader is on the highest ordinal, replaced while every other
// Pod is still old (docs/kubernetes.md, Rollouts). With
// sidecar.awaitReplacement the leader there leaves the Lease to its own
// replacement instead: the StatefulSet's rollout that begins with the
// leader on the highest ordinal (handed there first) moves it once. Each
// sidecar is checked to know its Pod's revision, and no round of samples
// of every Pod finds two leaders.
func TestRolloutMovesLeadershipOnce(t *testing.T) {
	t.Parallel()
	for _, w := range []workload{deploymentDefault, deploymentMaxSurge0, statefulSet, statefulSetAwaiting} {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			ns := cl.namespace(t)
			w.install(t, ctx, ns, 3, afterIssue38)
			rounds := 2
			if w.statefulSet {
				rounds = 1
			}
			if w.awaitsReplacement {
				handOffTo(t, ctx, ns, 3, fmt.Sprintf("%s-%d", fullName, 2))
			}
			for round := 1; round <= rounds; round++ {
				r := w.rollOut(t, ctx, ns, 3, round)
				t.Logf("rollout %d rolled out in %v; %d rounds of samples; leaders in turn %q; token %d → %d; longest leaderless %v",
					round, r.rolled.Round(time.Millisecond), r.rounds, r.seen, r.before, r.after, r.leaderless)
				if r.twoLeaderRounds > 0 || r.lateOlderClaims > 0 {
					t.Errorf("rollout %d: %d rounds had two Pods claim at one instant; %d claims of an older term were asked for after a newer term's claim had arrived",
						round, r.twoLeaderRounds, r.lateOlderClaims)
				}
				if want := w.wantMoves(r.leaderBefore, 3); r.moves() != want {
					t.Errorf("rollout %d moved leadership %d times (token %d → %d; leader before %s), want %d",
						round, r.moves(), r.before, r.after, r.leaderBefore, want)
				}
			}
		})
	}
}

// workload is how the example chart's Pods are run and rolled out: by the
// chart's Deployment under one strategy, or by a StatefulSet.
type workload struct {
	name string
	// set are helm values of the install.
	set []string
	// statefulSet: the Pods are a StatefulSet's (see useStatefulSet).
	statefulSet bool
	// awaitsReplacement: its sidecars leave a stopping leader's Lease to
	// its replacement (sidecar.awaitReplacement).
	awaitsReplacement bool
}

var (
	deploymentDefault   = workload{name: "default"}
	deploymentMaxSurge0 = workload{name: "maxSurge 0", set: []string{"--set", "strategy.type=RollingUpdate",
		"--set", "strategy.rollingUpdate.maxSurge=0", "--set", "strategy.rollingUpdate.maxUnavailable=1"}}
	statefulSet         = workload{name: "StatefulSet", statefulSet: true}
	statefulSetAwaiting = workload{name: "StatefulSet awaiting the replacement", statefulSet: true, awaitsReplacement: true,
		set: []string{"--set", "sidecar.awaitReplacement=30s"}}
)

// sidecarMode is what the sidecars are given of issue 38 ("one move per
// rollout"): its two measures, or neither.
type sidecarMode string

const (
	// afterIssue38 is the chart's defaults: the deletion cost on the
	// leader's Pod, and each sidecar knows its Pod's revision.
	afterIssue38 sidecarMode = "after"
	// beforeIssue38 is podDeletionCost false and no revision (both
	// variables given empty, after the chart's own, which the kubelet
	// lets win): a stopping leader hands off to whichever standby takes
	// the offer first.
	beforeIssue38 sidecarMode = "before"
)

// values are the helm values of mode.
func (m sidecarMode) values() []string {
	if m == afterIssue38 {
		return nil
	}
	return []string{"--set", "sidecar.podDeletionCost=false", "--set-json",
		`sidecar.extraEnv=[{"name":"POD_TEMPLATE_HASH","value":""},{"name":"POD_CONTROLLER_REVISION_HASH","value":""}]`}
}

// install installs the example chart in ns with replicas Pods of w in
// mode, waits for one leader, and checks that every sidecar was given
// what mode says: the deletion cost on or off, and its Pod's revision
// label or none.
func (w workload) install(tb testing.TB, ctx context.Context, ns string, replicas int, mode sidecarMode) {
	tb.Helper()
	deploymentReplicas := replicas
	if w.statefulSet {
		deploymentReplicas = 0
	}
	args := []string{"--set", fmt.Sprintf("replicaCount=%d", deploymentReplicas), "--wait", "--timeout", "2m"}
	install(tb, ctx, ns, append(append(args, w.set...), mode.values()...)...)
	if w.statefulSet {
		useStatefulSet(tb, ctx, ns, int32(replicas))
	}
	pods := runningPods(tb, ctx, ns, replicas, true)
	eventually(tb, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
		_, _, reason := oneLeader(ctx, ns, pods)
		return reason == "", reason
	})
	for _, p := range pods {
		revision, cost := sidecarRevisionAndCost(tb, ctx, ns, p.Name)
		want, wantCost := p.Labels["pod-template-hash"], true
		if w.statefulSet {
			want = p.Labels["controller-revision-hash"]
		}
		if mode == beforeIssue38 {
			want, wantCost = "", false
		} else if want == "" {
			tb.Fatalf("%s has no revision label: %v", p.Name, p.Labels)
		}
		if revision != want || cost != wantCost {
			tb.Fatalf("%s's sidecar has revision %q and pod-deletion-cost %v, want %q and %v (%s)", p.Name, revision, cost, want, wantCost, mode)
		}
	}
}

// useStatefulSet runs the example chart's Pods as a StatefulSet: the
// chart renders only a Deployment, so the StatefulSet is made from the
// installed Deployment (left at 0 replicas, so that helm uninstall still
// removes what helm made) with its name, selector and Pod template as
// the chart rendered them, and the default update strategy
// (RollingUpdate, from the highest ordinal down). Taking the Pod template
// from the chart keeps its sidecar, Downward API and RBAC exactly the
// chart's, where a chart of the test's own would drift from it.
func useStatefulSet(tb testing.TB, ctx context.Context, ns string, replicas int32) {
	tb.Helper()
	d, err := cl.client.AppsV1().Deployments(ns).Get(ctx, fullName, metav1.GetOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Labels: d.Labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas,
			Selector: d.Spec.Selector,
			Template: d.Spec.Template,
			// The chart's Service; the Pods need no DNS names.
			ServiceName: d.Name,
		},
	}
	if _, err := cl.client.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
}

// sidecarRevisionAndCost asks the sidecar of pod, by `sidecar check` in
// its container (the container's own arguments are not needed: the chart
// gives these two settings as variables), for the revision it read from
// the Downward API and whether it sets the deletion cost.
func sidecarRevisionAndCost(tb testing.TB, ctx context.Context, ns, pod string) (string, bool) {
	tb.Helper()
	out := cl.run(tb, ctx, cl.kubectl, "exec", "--namespace", ns, pod, "--container", sidecarContainer, "--", "/sidecar", "check")
	var revision, cost string
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "pod-deletion-cost: "); ok {
			cost = v
		}
		if _, v, ok := strings.Cut(line, " revision="); ok && strings.HasPrefix(line, "pod: ") {
			revision = v
		}
	}
	unquoted, err := strconv.Unquote(revision)
	if err != nil || (cost != "true" && cost != "false") {
		tb.Fatalf("%s: sidecar check printed no revision or pod-deletion-cost:\n%s", pod, out)
	}
	return unquoted, cost == "true"
}

// rollout is what one rollout did, as the Lease and the sampler saw it.
type rollout struct {
	before, after int32 // the Lease's token
	leaderBefore  string
	rolled        time.Duration
	rounds        int
	seen          []string
	leaderless    time.Duration
	// twoLeaderRounds and lateOlderClaims: sidecartest.ClaimLog's
	// TwoLeaderSweeps and Overlaps.
	twoLeaderRounds, lateOlderClaims int
}

// moves is how many times leadership moved: every move raises the token
// by one.
func (r rollout) moves() int { return int(r.after - r.before) }

// rollOut changes the Pod template's annotation e2e/rollout to round
// (as `kubectl rollout restart` does with its own annotation; nothing else
// of the template changes), sampling every Pod until the rollout is
// complete and a new Pod leads.
func (w workload) rollOut(tb testing.TB, ctx context.Context, ns string, replicas, round int) rollout {
	tb.Helper()
	var r rollout
	pods := runningPods(tb, ctx, ns, replicas, true)
	eventually(tb, ctx, "exactly one leader before the rollout", func() (bool, string) {
		var reason string
		_, r.leaderBefore, reason = oneLeader(ctx, ns, pods)
		return reason == "", reason
	})
	r.before = leaseToken(tb, ctx, ns)
	s := &sampler{ns: ns, newLeader: make(chan struct{})}
	finishSampling := s.start(ctx)
	defer func() { _ = finishSampling() }() // a rollout that fails early
	start := time.Now()
	kind := "deployment"
	if w.statefulSet {
		kind = "statefulset"
	}
	cl.run(tb, ctx, cl.kubectl, "patch", kind, fullName, "--namespace", ns, "--type", "merge",
		"--patch", fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"e2e/rollout":"%d"}}}}}`, round))
	eventually(tb, ctx, "the "+kind+" rolled out", func() (bool, string) {
		if w.statefulSet {
			return statefulSetRolledOut(ctx, ns)
		}
		return rolledOut(ctx, ns)
	})
	r.rolled = time.Since(start)
	current := runningPods(tb, ctx, ns, replicas, true)
	eventually(tb, ctx, "exactly one leader among the new Pods", func() (bool, string) {
		_, _, reason := oneLeader(ctx, ns, current)
		return reason == "", reason
	})
	select { // the new leader in the samples too, which ends a leaderless stretch
	case <-s.newLeader:
	case <-time.After(30 * time.Second):
		tb.Fatalf("rollout %d: the sampler never saw a new Pod lead", round)
	}
	_ = finishSampling() // the rounds are judged below, not run's error
	r.after = leaseToken(tb, ctx, ns)
	r.rounds, r.seen, r.leaderless = s.rounds, s.seen, s.longestLeaderless
	r.twoLeaderRounds = s.log.TwoLeaderSweeps()
	r.lateOlderClaims, _ = s.log.Overlaps()
	return r
}

// wantMoves is how many times a rollout of w's replicas moves leadership
// from leader: once, but a StatefulSet replaces the highest ordinal first,
// when only old Pods can take over, and the one that does is replaced
// later: twice.
// With awaitsReplacement the leader there waits for its own replacement:
// once.
func (w workload) wantMoves(leader string, replicas int) int {
	if w.startsOnHighest(leader, replicas) && !w.awaitsReplacement {
		return 2
	}
	return 1
}

// startsOnHighest says whether w is a StatefulSet whose rollout begins
// with leader on the Pod it replaces first, the highest ordinal.
func (w workload) startsOnHighest(leader string, replicas int) bool {
	return w.statefulSet && strings.HasSuffix(leader, fmt.Sprintf("-%d", replicas-1))
}

// handOffTo moves leadership in ns to pod, by `sidecar handoff` in the
// leader's sidecar, unless pod leads already.
func handOffTo(tb testing.TB, ctx context.Context, ns string, replicas int, pod string) {
	tb.Helper()
	pods := runningPods(tb, ctx, ns, replicas, true)
	var leader string
	eventually(tb, ctx, "exactly one leader before the hand-off", func() (bool, string) {
		var reason string
		_, leader, reason = oneLeader(ctx, ns, pods)
		return reason == "", reason
	})
	if leader == pod {
		return
	}
	cl.run(tb, ctx, cl.kubectl, "exec", "--namespace", ns, leader, "--container", sidecarContainer, "--", "/sidecar", "handoff", "--to", pod)
	eventually(tb, ctx, pod+" leads", func() (bool, string) {
		_, now, reason := oneLeader(ctx, ns, pods)
		return reason == "" && now == pod, fmt.Sprintf("%s leads (%s)", now, reason)
	})
}

// statefulSetRolledOut says whether the StatefulSet has only replicas of
// its update revision, as many as it wants, each ready.
func statefulSetRolledOut(ctx context.Context, ns string) (bool, string) {
	s, err := cl.client.AppsV1().StatefulSets(ns).Get(ctx, fullName, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	st, want := s.Status, *s.Spec.Replicas
	if st.ObservedGeneration < s.Generation || st.CurrentRevision != st.UpdateRevision ||
		st.UpdatedReplicas != want || st.Replicas != want || st.ReadyReplicas != want {
		return false, fmt.Sprintf("generation %d observed %d, revision %s updating to %s, replicas %d updated %d ready %d, want %d",
			s.Generation, st.ObservedGeneration, st.CurrentRevision, st.UpdateRevision, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, want)
	}
	return true, ""
}

// leaseToken is the example chart's Lease's token in ns.
func leaseToken(t testing.TB, ctx context.Context, ns string) int32 {
	t.Helper()
	l, err := cl.client.CoordinationV1().Leases(ns).Get(ctx, fullName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(l.Spec.LeaseTransitions, 0)
}
