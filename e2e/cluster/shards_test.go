//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// TestExampleChartShardMode installs the example chart in shard mode
// (sidecar.sharding, 8 shards, 3 replicas, the worker with --shards) with
// its default timings: the shards spread, every one held by exactly one
// Pod and no Pod above its fair share of 3, and each shard's Lease names
// its holder with its token. Then one Pod is deleted at once (no grace
// period): its shards' Leases name other holders, with higher tokens, and
// the shards spread again over the two Pods left and the Pod that replaces
// it, none above 3; its member Lease, owned by the Pod, is deleted by the
// garbage collector. No claim of a shard sampled from the Pods' GET
// /shards overlaps another holder's (claimLog). It logs the shard Leases'
// records from the delete on, which show where the time goes
// (docs/shards.md, "On the cluster"): the deleted Pod's shards wait out
// the lease, counted by a Pod that replaces it from its own start, and
// the spread waits for the rebalance delay after the replacement joins.
func TestExampleChartShardMode(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	const shards, replicas = 8, 3
	install(t, ctx, ns, "--set", fmt.Sprintf("replicaCount=%d,sidecar.sharding.enabled=true,sidecar.sharding.shards=%d", replicas, shards),
		"--set", "app.args={--sidecar=$(LEADER_SIDECAR_URL),--db=/data/results.db,--resource=example,--name=$(POD_NAME),--shards}",
		"--wait", "--timeout", "2m")
	pods := runningPods(t, ctx, ns, replicas, true)
	claims := newClaimLog()
	defer claims.check(t)

	var held map[int]shardHolder
	eventually(t, ctx, "every shard held by one Pod, none above 3, as the Leases say", func() (bool, string) {
		var reason string
		held, _, reason = spread(ctx, ns, pods, shards, 3, claims)
		return reason == "", reason
	})

	gone := pods[0]
	var goneShards []int
	for i, h := range held {
		if h.pod == gone.Name {
			goneShards = append(goneShards, i)
		}
	}
	if len(goneShards) == 0 {
		t.Fatalf("%s holds no shard: %+v", gone.Name, held)
	}
	members, err := cl.client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	goneMember := shardgroup.MemberRecord(fullName, held[goneShards[0]].identity)
	if !hasLease(members.Items, goneMember) {
		t.Fatalf("no member Lease %s for the Pod %s", goneMember, gone.Name)
	}
	history := watchShardLeases(t, ctx, ns, shards)
	deleted := time.Now()
	cl.run(t, ctx, cl.kubectl, "delete", "pod", "--namespace", ns, "--grace-period=0", "--force", gone.Name)
	var again time.Duration
	eventually(t, ctx, "every shard Lease of the deleted Pod naming another holder", func() (bool, string) {
		for _, i := range goneShards {
			r, ok := history.firstHolderAfter(i, held[i].identity)
			if !ok {
				return false, fmt.Sprintf("shard %d: its Lease still names %s", i, held[i].identity)
			}
			if r.token <= held[i].token {
				t.Fatalf("shard %d: held by %s with token %d, was %d", i, r.holder, r.token, held[i].token)
			}
			again = max(again, r.at.Sub(deleted))
		}
		return true, ""
	})
	eventually(t, ctx, "the shards spread again over the Pods, none above 3", func() (bool, string) {
		now := runningPods(t, ctx, ns, replicas, true)
		next, _, reason := spread(ctx, ns, now, shards, 3, claims)
		if reason != "" {
			return false, reason
		}
		for _, i := range goneShards {
			if next[i].pod == gone.Name || next[i].token <= held[i].token {
				return false, fmt.Sprintf("shard %d: held by %s with token %d, was %d", i, next[i].pod, next[i].token, held[i].token)
			}
		}
		return true, ""
	})
	rehold := time.Since(deleted)
	for _, i := range goneShards {
		r, _ := history.firstHolderAfter(i, held[i].identity)
		if last, ok := history.lastNaming(i, held[i].identity, r.at); ok {
			t.Logf("shard %d: the deleted Pod's last record (a renewal) arrived %v after the delete, the next holder's %v after it",
				i, last.at.Sub(deleted).Round(time.Millisecond), r.at.Sub(last.at).Round(time.Millisecond))
		}
	}
	history.log(t, deleted)
	if now, err := cl.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release}); err == nil {
		for _, p := range now.Items {
			for _, s := range p.Status.InitContainerStatuses {
				if s.Name == sidecarContainer && s.State.Running != nil && s.State.Running.StartedAt.After(deleted) {
					t.Logf("%s: its sidecar started %v after the delete", p.Name, s.State.Running.StartedAt.Sub(deleted).Round(time.Second))
				}
			}
		}
	}
	eventually(t, ctx, "the deleted Pod's member Lease collected", func() (bool, string) {
		list, err := cl.client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return !hasLease(list.Items, goneMember), goneMember + " still there"
	})
	t.Logf("%s held shards %v: their Leases named other holders, with higher tokens, %v after the delete; the shards spread again, none above 3, %v after it; its member Lease collected %v after it",
		gone.Name, goneShards, again.Round(time.Millisecond), rehold.Round(time.Millisecond), time.Since(deleted).Round(time.Millisecond))
}

// shardHolder is the Pod holding a shard, with its sidecar's identity and
// the shard's token.
type shardHolder struct {
	pod, identity string
	token         int64
}

// spread asks every Pod's sidecar for GET /shards (the claims go to
// claims, which judges them) and returns who holds each shard and each
// Pod's answer, or why the shards are not spread: a Pod that does not
// answer, a shard unheld or listed by two Pods, a Pod above fairShare, or
// a shard Lease that names another holder or token.
func spread(ctx context.Context, ns string, pods []corev1.Pod, shards, fairShare int, claims *claimLog) (map[int]shardHolder, []shardsAnswer, string) {
	answers, err := sweep(ctx, ns, podNames(pods))
	claims.add(answers)
	if err != nil {
		return nil, nil, err.Error()
	}
	held := map[int]shardHolder{}
	for _, a := range answers {
		if len(a.Held) > fairShare {
			return nil, nil, fmt.Sprintf("%s holds %d shards", a.pod, len(a.Held))
		}
		for _, s := range a.Held {
			if other, ok := held[s.Shard]; ok {
				return nil, nil, fmt.Sprintf("shard %d listed by %s and %s in one sweep", s.Shard, other.pod, a.pod)
			}
			held[s.Shard] = shardHolder{pod: a.pod, identity: a.Identity, token: s.Token}
		}
	}
	for i := range shards {
		h, ok := held[i]
		if !ok {
			return nil, nil, fmt.Sprintf("shard %d held by no Pod", i)
		}
		lease, err := cl.client.CoordinationV1().Leases(ns).Get(ctx, shardgroup.ShardRecord(fullName, i), metav1.GetOptions{})
		if err != nil {
			return nil, nil, err.Error()
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != h.identity ||
			lease.Spec.LeaseTransitions == nil || int64(*lease.Spec.LeaseTransitions) != h.token {
			return nil, nil, fmt.Sprintf("shard %d: held by %s with token %d, its Lease names %v with %v", i, h.identity, h.token,
				lease.Spec.HolderIdentity, lease.Spec.LeaseTransitions)
		}
	}
	return held, answers, ""
}

// sidecarStopLines are the texts of the lines of a sidecar's log that
// tell how it left its group; appStopLines those of the example worker's
// that tell how it stopped.
var (
	sidecarStopLines = []string{"shutting down", "leaving the group", "draining a shard", "releasing a drained shard",
		"released the lease", "left the group", "\"stopped\""}
	appStopLines = []string{"shard-term-over", "drained", "\"stopped\"", "failed"}
)

// logTimeline logs the lines of a followed log that contain one of texts,
// from the second before from on, with the time since from.
func logTimeline(t *testing.T, log <-chan string, pod string, from time.Time, texts []string) {
	t.Helper()
	var all string
	select {
	case all = <-log:
	case <-time.After(30 * time.Second):
		t.Logf("%s: a followed log did not end within 30 s", pod)
		return
	}
	lines := strings.Split(strings.TrimSpace(all), "\n")
	t.Logf("%s: %d lines logged", pod, len(lines))
	for _, line := range lines {
		stamp, rest, _ := strings.Cut(line, " ")
		ts, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil || ts.Before(from.Add(-time.Second)) {
			continue
		}
		for _, text := range texts {
			if strings.Contains(rest, text) {
				t.Logf("%s +%v: %s", pod, ts.Sub(from).Round(time.Millisecond), rest)
				break
			}
		}
	}
}

func hasLease(leases []coordinationv1.Lease, name string) bool {
	for _, l := range leases {
		if l.Name == name {
			return true
		}
	}
	return false
}
