package apiserver

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// TestLeaseShardGroup runs 3 sidecar processes in shard mode on the
// Lease backend of a real API server, with every replica's /shards
// sampled throughout: the 8 shards spread over them, each held once, at
// most 3 each, one Lease per shard and one per member; after a kill -9 of
// one, its shards are held again by the others with higher tokens once its
// claims expire; after a SIGTERM of another, the last one holds every
// shard within a few retry periods and the leaver's member Lease names no
// holder. No shard is ever claimed by two replicas at one instant. The
// member Lease of a replica whose POD_UID is set is owned by its Pod.
// Each shard's terms are Kubernetes Events about the replica's Pod,
// related to the shard's Lease. A replica keeps one watch of Leases open,
// the namespace's, shared by its 8 shards' electors (each watching its own
// Lease would be 8), as a counting proxy in front of app-2 sees, from the
// spread to the end; from the spread to the end it also sends no list of
// Leases (its member view comes from that watch), while that view still
// drops the replica killed and the one that left.
func TestLeaseShardGroup(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, group := k.Namespace(t), "billing"
	kc := k.Kubeconfig(t, "")
	p := sidecartest.NewShardSampler(sidecartest.TestShards)
	var live []*sidecartest.Sidecar
	start := time.Now()
	// app-0 and app-1 are Pods of the API server, and their sidecars know
	// their UIDs (POD_UID, as the chart gives it); app-2's does not.
	uids := map[string]string{}
	for _, pod := range []string{"app-0", "app-1"} {
		uids[pod] = k.CreatePod(t, ns, pod)
	}
	podOf := map[*sidecartest.Sidecar]string{}
	watches := newWatchCountingProxy(t, k.Config)
	oneWatch := func(when string) {
		t.Helper()
		if open, opened := watches.open.Load(), watches.opened.Load(); open != 1 {
			t.Errorf("%s: app-2 has %d watches of Leases open (%d opened), want 1", when, open, opened)
		} else {
			t.Logf("%s: app-2 has 1 watch of Leases open (%d opened) for %d shards", when, opened, sidecartest.TestShards)
		}
	}
	for _, pod := range []string{"app-0", "app-1", "app-2"} {
		env := []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + ns}
		if uid, ok := uids[pod]; ok {
			env = append(env, "POD_UID="+uid)
		}
		// Every shard's renewals go through the one client: at these
		// timings 8 shards renew 8 times a second, above the single
		// election's rate, and the sidecar sizes its rate by the shards.
		kubeconfig := kc
		if pod == "app-2" {
			kubeconfig = watches.kubeconfig(t)
		}
		s := sidecartest.Spawn(t, env, append([]string{"--backend", "lease", "--kubeconfig", kubeconfig, "--namespace", ns, "--lease-name", group},
			sidecartest.ShardArgs()...)...)
		s.WaitServing()
		p.Sample(s)
		live = append(live, s)
		podOf[s] = pod
	}
	holders, tokens := p.AwaitSpread(t, live, 20*time.Second, sidecartest.AnyToken)
	t.Logf("8 shards spread over 3 replicas %v after start", time.Since(start).Round(time.Millisecond))
	oneWatch("spread over 3")
	listsAtSpread, spread := watches.lists.Load(), time.Now()
	t.Logf("app-2 sent %d lists of Leases before the spread", listsAtSpread)
	// The Events of each term begun, but those of the replica killed
	// below, which may die before its recorder has sent them.
	began := map[shardEvent]bool{}
	for i, h := range holders {
		if h != live[0] {
			began[shardEvent{"BecameLeader", podOf[h], shardgroup.ShardRecord(group, i), tokens[i]}] = true
		}
	}
	var owners map[string][]metav1.OwnerReference
	leases := func() map[string]string {
		list, err := k.Client.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		holder := map[string]string{}
		owners = map[string][]metav1.OwnerReference{}
		for _, l := range list.Items {
			holder[l.Name] = sidecartest.Deref(l.Spec.HolderIdentity).(string)
			owners[l.Name] = l.OwnerReferences
		}
		return holder
	}
	all := leases()
	// The member Lease of a sidecar that knows its Pod's UID is owned by
	// that Pod, still after its renewals (so the garbage collector of a
	// real cluster deletes it with the Pod); the others and the shards'
	// Leases name no owner.
	for _, s := range live {
		pod := podOf[s]
		got := owners[shardgroup.MemberRecord(group, sidecartest.IdentityOfShards(t, s))]
		uid, known := uids[pod]
		switch {
		case known && (len(got) != 1 || got[0].APIVersion != "v1" || got[0].Kind != "Pod" || got[0].Name != pod || string(got[0].UID) != uid ||
			got[0].Controller != nil || got[0].BlockOwnerDeletion != nil):
			t.Errorf("the member Lease of %s has owners %+v, want only its Pod (uid %s)", pod, got, uid)
		case !known && len(got) != 0:
			t.Errorf("the member Lease of %s, whose sidecar has no POD_UID, has owners %+v", pod, got)
		}
	}
	for i := range sidecartest.TestShards {
		if got := owners[shardgroup.ShardRecord(group, i)]; len(got) != 0 {
			t.Errorf("the Lease of shard %d has owners %+v, want none", i, got)
		}
	}
	for i := range sidecartest.TestShards {
		if _, ok := all[shardgroup.ShardRecord(group, i)]; !ok {
			t.Errorf("no Lease of shard %d: %v", i, all)
		}
	}
	for _, s := range live {
		id := sidecartest.IdentityOfShards(t, s)
		if all[shardgroup.MemberRecord(group, id)] != id {
			t.Errorf("the member Lease of %s names %q", id, all[shardgroup.MemberRecord(group, id)])
		}
	}

	victim := live[0]
	lost := sidecartest.HeldBy(victim, holders)
	killed := time.Now()
	victim.Signal(syscall.SIGKILL)
	victim.WaitExit(10 * time.Second)
	live = live[1:]
	holders, tokens = p.AwaitSpread(t, live, sidecartest.LeaseDuration+8*sidecartest.RetryPeriod+2*time.Second, sidecartest.HigherThan(lost, tokens))
	took := time.Since(killed)
	t.Logf("kill -9: shards %v held again after %v (lease %v)", lost, took.Round(time.Millisecond), sidecartest.LeaseDuration)
	if took < sidecartest.LeaseDuration-sidecartest.RenewInterval {
		t.Errorf("the killed replica's shards were held again after %v, before its claims could have expired", took)
	}

	leaver := live[0]
	leaverID := sidecartest.IdentityOfShards(t, leaver)
	moved := sidecartest.HeldBy(leaver, holders)
	stopped := time.Now()
	leaver.Signal(syscall.SIGTERM)
	live = live[1:]
	p.AwaitSpread(t, live, 6*sidecartest.RetryPeriod, sidecartest.HigherThan(moved, tokens))
	t.Logf("SIGTERM: shards %v moved after %v", moved, time.Since(stopped).Round(time.Millisecond))
	oneWatch("holding all 8")
	if n, d := watches.lists.Load()-listsAtSpread, time.Since(spread); n != 0 {
		t.Errorf("app-2 sent %d lists of Leases in the %v (%d retry periods) from the spread, want none: its member view comes from its watch",
			n, d.Round(time.Millisecond), d/sidecartest.RetryPeriod)
	} else {
		t.Logf("app-2 sent no list of Leases in the %v (%d retry periods) from the spread", d.Round(time.Millisecond), d/sidecartest.RetryPeriod)
	}
	if code := leaver.WaitExit(10 * time.Second); code != 0 {
		t.Errorf("the replica stopped with SIGTERM exited %d, want 0", code)
	}
	if h, ok := leases()[shardgroup.MemberRecord(group, leaverID)]; !ok || h != "" {
		t.Errorf("the member Lease of the replica that left names %q (present %v), want no holder", h, ok)
	}
	// Every shard's terms are Kubernetes Events about the replica's Pod,
	// related to the shard's Lease: each term of the spread begun, and
	// each term of the replica stopped with SIGTERM ended.
	for _, i := range moved {
		began[shardEvent{"StoppedLeading", podOf[leaver], shardgroup.ShardRecord(group, i), tokens[i]}] = true
	}
	awaitShardEvents(t, k, ns, began)
	p.Check(t)
}

// TestLeaseShardGroupOf64 runs 3 replicas of a group of 64 shards on the
// Lease backend at the rate the sidecar sizes by itself (no
// --kube-api-qps): every shard is held, once, within a few lease
// durations, and again after four more. At the single election's rate (5
// a second) 64 shards were held by nobody: requests waited in the client
// past their deadlines, the member records were not written, and every
// replica contended for every shard.
func TestLeaseShardGroupOf64(t *testing.T) {
	t.Parallel()
	const shards = 64
	k := sidecartest.Kube(t)
	ns, group := k.Namespace(t), "ledger"
	kc := k.Kubeconfig(t, "")
	p := sidecartest.NewShardSampler(shards)
	var live []*sidecartest.Sidecar
	start := time.Now()
	for _, pod := range []string{"app-0", "app-1", "app-2"} {
		s := sidecartest.Spawn(t, []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + ns},
			"--backend", "lease", "--kubeconfig", kc, "--namespace", ns, "--lease-name", group,
			"--shards", strconv.Itoa(shards), "--shard-rebalance-delay", "1s", "--shard-drain-timeout", "10s")
		s.WaitServing()
		p.Sample(s)
		live = append(live, s)
	}
	_, tokens := p.AwaitSpread(t, live, 6*sidecartest.LeaseDuration, sidecartest.AnyToken)
	t.Logf("%d shards spread over 3 replicas %v after start (lease %v)", shards, time.Since(start).Round(time.Millisecond), sidecartest.LeaseDuration)
	// Still held, and spread, four lease durations later. A term may
	// lapse on a loaded machine (the short timings give a renewal 2s);
	// starved, no shard would be held at all.
	time.Sleep(4 * sidecartest.LeaseDuration)
	_, later := p.AwaitSpread(t, live, sidecartest.LeaseDuration, sidecartest.AnyToken)
	moved := 0
	for i := range later {
		if later[i] != tokens[i] {
			moved++
		}
	}
	t.Logf("four lease durations later every shard is held, %d of them in a later term", moved)
	p.Check(t)
}

// shardEvent is a Kubernetes Event of one term of a shard: its action,
// the Pod it is about, the shard's Lease it relates to and the token.
type shardEvent struct {
	action, pod, lease string
	token              int64
}

// awaitShardEvents waits up to 15 s until ns has every Event in want
// (reason LeaderElection, its note naming the token), and fails t with
// those it lacks.
func awaitShardEvents(t *testing.T, k *sidecartest.KubeEnv, ns string, want map[shardEvent]bool) {
	t.Helper()
	notes := map[string]string{"BecameLeader": "/%s with fencing token %d", "StoppedLeading": "/%s (token %d)"}
	for deadline := time.Now().Add(15 * time.Second); len(want) > 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		list, err := k.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range list.Items {
			if ev.Reason != "LeaderElection" || ev.Regarding.Kind != "Pod" || ev.Related == nil || ev.Related.Kind != "Lease" {
				continue
			}
			for w := range want {
				if ev.Action == w.action && ev.Regarding.Name == w.pod && ev.Related.Name == w.lease &&
					strings.Contains(ev.Note, fmt.Sprintf(notes[w.action], w.lease, w.token)) {
					delete(want, w)
				}
			}
		}
	}
	for w := range want {
		t.Errorf("no Event %s about Pod %s related to Lease %s with token %d", w.action, w.pod, w.lease, w.token)
	}
}
