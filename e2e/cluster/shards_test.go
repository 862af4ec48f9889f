//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// TestExampleChartShardMode installs the example chart in shard mode
// (sidecar.sharding, 8 shards, 3 replicas, the worker with --shards): the
// shards spread, every one held by exactly one Pod and no Pod above its
// fair share of 3, and each shard's Lease names its holder with its token.
// Then one Pod is deleted at once (no grace period): its shards are held
// again, by the others or its replacement, with higher tokens, and its
// member Lease, owned by the Pod, is deleted by the garbage collector.
// No sweep of every Pod's /shards finds two Pods claiming a shard at one
// instant (see spread).
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

	var held map[int]shardHolder
	eventually(t, ctx, "every shard held by one Pod, none above 3, as the Leases say", func() (bool, string) {
		var reason string
		held, reason = spread(t, ctx, ns, pods, shards, 3)
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
	deleted := time.Now()
	cl.run(t, ctx, cl.kubectl, "delete", "pod", "--namespace", ns, "--grace-period=0", "--force", gone.Name)
	eventually(t, ctx, "the deleted Pod's shards held again with higher tokens", func() (bool, string) {
		now := runningPods(t, ctx, ns, replicas, true)
		next, reason := spread(t, ctx, ns, now, shards, 3)
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
	eventually(t, ctx, "the deleted Pod's member Lease collected", func() (bool, string) {
		list, err := cl.client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return !hasLease(list.Items, goneMember), goneMember + " still there"
	})
	t.Logf("%s held shards %v; held again with higher tokens %v after the delete, its member Lease collected %v after it",
		gone.Name, goneShards, rehold.Round(time.Millisecond), time.Since(deleted).Round(time.Millisecond))
}

// shardHolder is the Pod holding a shard, with its sidecar's identity and
// the shard's token.
type shardHolder struct {
	pod, identity string
	token         int64
}

// spread asks every Pod's sidecar for GET /shards, one after another, and
// returns who holds each shard, or why the shards are not spread. A shard
// claimed by two Pods in one sweep is an overlap, which fails t at once,
// unless the later answer names a higher token: the shard then moved
// between the two answers (a release, then an acquire), which is a reason
// to wait, as are a shard unheld, a Pod above fairShare, or a shard Lease
// that names another holder or token. The later Pod is asked after the
// earlier one answered, so a later claim of the same or an older token
// means that two Pods claimed the shard at one instant.
func spread(t *testing.T, ctx context.Context, ns string, pods []corev1.Pod, shards, fairShare int) (map[int]shardHolder, string) {
	t.Helper()
	held := map[int]shardHolder{}
	var moved []int
	for _, p := range pods {
		out, err := cl.try(ctx, cl.kubectl, "exec", "--namespace", ns, p.Name, "--container", sidecarContainer, "--",
			"/sidecar", "probe", "--address", "127.0.0.1:4040", "/shards")
		if err != nil {
			return nil, fmt.Sprintf("%s: %v", p.Name, err)
		}
		var st fence.ShardsJSON
		if i := strings.Index(out, "{"); i < 0 {
			return nil, fmt.Sprintf("%s: no JSON in %q", p.Name, out)
		} else if err := json.Unmarshal([]byte(out[i:]), &st); err != nil {
			return nil, fmt.Sprintf("%s: %v in %q", p.Name, err, out)
		}
		if len(st.Held) > fairShare {
			return nil, fmt.Sprintf("%s holds %d shards", p.Name, len(st.Held))
		}
		for _, s := range st.Held {
			if other, ok := held[s.Shard]; ok {
				if s.Token <= other.token {
					t.Fatalf("shard %d claimed with token %d by %s, then with token %d by %s, asked after the first answered",
						s.Shard, other.token, other.pod, s.Token, p.Name)
				}
				moved = append(moved, s.Shard)
			}
			held[s.Shard] = shardHolder{pod: p.Name, identity: st.Identity, token: s.Token}
		}
	}
	if len(moved) > 0 {
		return nil, fmt.Sprintf("shards %v moved during the sweep", moved)
	}
	for i := range shards {
		h, ok := held[i]
		if !ok {
			return nil, fmt.Sprintf("shard %d held by no Pod", i)
		}
		lease, err := cl.client.CoordinationV1().Leases(ns).Get(ctx, shardgroup.ShardRecord(fullName, i), metav1.GetOptions{})
		if err != nil {
			return nil, err.Error()
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != h.identity ||
			lease.Spec.LeaseTransitions == nil || int64(*lease.Spec.LeaseTransitions) != h.token {
			return nil, fmt.Sprintf("shard %d: held by %s with token %d, its Lease names %v with %v", i, h.identity, h.token,
				lease.Spec.HolderIdentity, lease.Spec.LeaseTransitions)
		}
	}
	return held, ""
}

func hasLease(leases []coordinationv1.Lease, name string) bool {
	for _, l := range leases {
		if l.Name == name {
			return true
		}
	}
	return false
}
