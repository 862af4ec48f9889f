//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// TestExampleChartShardScaling installs the example chart in shard mode
// (8 shards, the worker with --shards acknowledging every drain) with
// short timings (lease 6 s, renew deadline 4 s, retry period 1 s,
// rebalance delay and drain timeout 3 s), and scales it 3 -> 5 -> 1 -> 4
// replicas with kubectl scale. After each step the group must converge:
// as many Pods as replicas, each seeing every other as a member, and every
// shard held by the Pod that shard.Assign gives it over their identities
// (so none above its fair share ceil(8/replicas)), as every Pod's GET
// /shards and every shard Lease say alike.
//
// The moves of a step are the terms begun in it: the sum over the shards
// of the rise of the shard's token (its Lease's leaseTransitions), which
// counts a shard that passed through an intermediate holder twice. The
// fewest moves a step needs are the shards whose holder must change to
// reach any table in which every member holds floor(8/M) or ceil(8/M)
// shards (M members after the step): every shard of a removed member,
// plus, for the members that stay, the shards above their target, the
// ceil targets going to those holding most (on scale-up, the shards that
// must leave over-full members; on scale-down, those of the removed
// members and any above the new ceiling). Each step logs its moves
// against that minimum, and fails if they are below it (the count would
// be wrong).
//
// Then one Pod is deleted with its grace period, as a rollout or a
// drain of its node would: its sidecar leaves the group and releases its
// shards at once (the worker is stopped first and can acknowledge no
// drain, so the chart's sidecar.sharding.stopDrainTimeout is 0s), and
// each is taken by another Pod with the next token. The shard Leases' history, watched from before the
// delete, shows it for every shard of the Pod: its holder, then a
// released record (no holder), then the new holder; no expiry in
// between.
//
// Throughout, a sampler sweeps every running sidecar's GET /shards: no
// shard is claimed by two holders at one instant (claimLog.overlaps). And
// every worker writes one results file on the node (a hostPath shared by
// the Pods) through the per-shard guard: across every move of the run,
// the log of accepted writes holds no write of a shard after a newer term
// of it (checkShardWrites).
func TestExampleChartShardScaling(t *testing.T) {
	// Not parallel: it runs before the parallel tests, as go test runs
	// the tests that do not call t.Parallel first. Its five replicas of
	// eight shards each, at short timings, load the API server enough to
	// stretch the bounds of the tests beside it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	const shards, replicas = 8, 3
	data, volume := sharedDataVolume(t, ctx, ns)
	install(t, ctx, ns, "--set", fmt.Sprintf("replicaCount=%d,sidecar.sharding.enabled=true,sidecar.sharding.shards=%d", replicas, shards),
		"--set", "app.args={--sidecar=$(LEADER_SIDECAR_URL),--db=/data/results.db,--resource=example,--name=$(POD_NAME),--shards}",
		"--set-json", "app.dataVolume="+volume,
		"--set", "sidecar.sharding.rebalanceDelay=3s,sidecar.sharding.drainTimeout=3s",
		"--set", "sidecar.leaseDuration=6s,sidecar.renewDeadline=4s,sidecar.retryPeriod=1s",
		// 8 shards renewed every 2 s and a list every second: above the
		// default 5 requests a second for a replica that holds them all.
		"--set", "sidecar.extraArgs={--kube-api-qps=50}",
		"--wait", "--timeout", "2m")
	claims := newClaimLog()
	sampling, stopSampling := context.WithCancel(ctx)
	sampled := sampleShards(sampling, ns, claims)
	defer func() {
		stopSampling()
		<-sampled
		claims.check(t)
	}()

	g := convergeShards(t, ctx, ns, replicas, shards, claims)
	for _, n := range []int{5, 1, 4} {
		before := g
		start := time.Now()
		cl.run(t, ctx, cl.kubectl, "scale", "deployment", fullName, "--namespace", ns, fmt.Sprintf("--replicas=%d", n))
		g = convergeShards(t, ctx, ns, n, shards, claims)
		moves, fewest := termsBegun(before.held, g.held), fewestMoves(before.held, g.identities(), shards)
		t.Logf("%d -> %d replicas: converged in %v; loads %v; moves %d, fewest %d (ratio %.2f)",
			len(before.answers), n, time.Since(start).Round(time.Millisecond), g.loads(), moves, fewest, ratio(moves, fewest))
		if moves < fewest {
			t.Errorf("%d -> %d replicas: %d moves counted, below the fewest possible %d", len(before.answers), n, moves, fewest)
		}
	}

	// A Pod deleted with its grace period releases its shards.
	var gone string
	var goneShards []int
	for i := range shards {
		if h := g.held[i]; gone == "" || h.pod == gone {
			gone = h.pod
			goneShards = append(goneShards, i)
		}
	}
	history := watchShardLeases(t, ctx, ns, shards)
	sidecarLog, appLog := follow(ctx, ns, gone, sidecarContainer), follow(ctx, ns, gone, "app")
	time.Sleep(time.Second)
	deleted := time.Now()
	cl.run(t, ctx, cl.kubectl, "delete", "pod", "--namespace", ns, "--wait=false", gone)
	var elsewhere map[int]shardRecordSeen
	eventually(t, ctx, "every shard of the deleted Pod held by another with a higher token", func() (bool, string) {
		elsewhere = map[int]shardRecordSeen{}
		for _, i := range goneShards {
			r, ok := history.firstHolderAfter(i, g.held[i].identity)
			if !ok {
				return false, fmt.Sprintf("shard %d: its Lease has named no other holder yet", i)
			}
			elsewhere[i] = r
		}
		return true, ""
	})
	logTimeline(t, appLog, gone+" app", deleted, appStopLines)
	logTimeline(t, sidecarLog, gone+" sidecar", deleted, sidecarStopLines)
	history.log(t, deleted)
	var last time.Duration
	for _, i := range goneShards {
		old, next := g.held[i], elsewhere[i]
		holders := history.holders(i, next.at)
		t.Logf("shard %d: holders in turn %q; held by %s with token %d %v after the delete (token %d before)",
			i, holders, next.holder, next.token, next.at.Sub(deleted).Round(time.Millisecond), old.token)
		if r, ok := history.lastNaming(i, old.identity, next.at); ok {
			t.Logf("shard %d: the deleted Pod's last record arrived %v after the delete", i, r.at.Sub(deleted).Round(time.Millisecond))
		}
		last = max(last, next.at.Sub(deleted))
		want := []string{old.identity, "", next.holder}
		if !slices.Equal(holders, want) && !slices.Equal(holders, want[1:]) {
			t.Errorf("shard %d: its Lease's holders in turn %q, want %q: the deleted Pod releasing it, then another acquiring it", i, holders, want)
		}
		if next.token != old.token+1 {
			t.Errorf("shard %d: token %d after %d, want %d", i, next.token, old.token, old.token+1)
		}
	}
	t.Logf("%s held shards %v; all held elsewhere, each after a release, %v after the delete", gone, goneShards, last.Round(time.Millisecond))
	checkShardWrites(t, ctx, filepath.Join(data, "results.db"), shards)
}

// checkShardWrites reads the log of the writes the workers' per-shard
// guard accepted in the results file all the Pods share, in commit order:
// none may be stale (a write of a shard after a newer term of it was
// accepted), every shard must have been written, and some shard by more
// than one holder, so the check saw terms change hands.
func checkShardWrites(t *testing.T, ctx context.Context, results string, shards int) {
	t.Helper()
	writes, err := sidecartest.ReadShardWrites(ctx, results)
	if err != nil {
		t.Fatalf("reading the workers' log of accepted writes: %v", err)
	}
	stale, last := sidecartest.StaleShardWritesAccepted(writes)
	if stale != 0 {
		t.Errorf("%d stale writes accepted by the guard", stale)
	}
	if len(last) != shards {
		t.Errorf("writes on %d shards, want %d", len(last), shards)
	}
	holders := map[string]map[string]bool{}
	for _, w := range writes {
		if holders[w.Resource] == nil {
			holders[w.Resource] = map[string]bool{}
		}
		holders[w.Resource][w.Holder] = true
	}
	moved := 0
	for _, h := range holders {
		if len(h) > 1 {
			moved++
		}
	}
	if moved == 0 {
		t.Errorf("no shard was written by more than one holder: the writes crossed no move")
	}
	t.Logf("%d writes accepted over %d shards, %d stale; %d shards written by more than one holder", len(writes), len(last), stale, moved)
}

// shardGroupState is a converged group: who holds each shard, and every
// Pod's answer.
type shardGroupState struct {
	held    map[int]shardHolder
	answers []shardsAnswer
}

// identities are the sidecars' identities, sorted.
func (g shardGroupState) identities() []string {
	var ids []string
	for _, a := range g.answers {
		ids = append(ids, a.Identity)
	}
	slices.Sort(ids)
	return ids
}

// loads are the numbers of shards each Pod holds, highest first.
func (g shardGroupState) loads() []int {
	var out []int
	for _, a := range g.answers {
		out = append(out, len(a.Held))
	}
	sort.Sort(sort.Reverse(sort.IntSlice(out)))
	return out
}

// convergeShards waits until ns runs replicas Pods of the release, each
// sees every Pod's sidecar as a member (and no other), and every shard is
// held by the Pod shard.Assign gives it over their identities, as the
// shard Leases say; and returns that state.
func convergeShards(t *testing.T, ctx context.Context, ns string, replicas, shards int, claims *claimLog) shardGroupState {
	t.Helper()
	var g shardGroupState
	eventually(t, ctx, fmt.Sprintf("%d Pods holding the %d shards as shard.Assign gives them", replicas, shards), func() (bool, string) {
		list, err := cl.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err != nil {
			return false, err.Error()
		}
		if len(list.Items) != replicas {
			return false, fmt.Sprintf("%d Pods", len(list.Items))
		}
		for _, p := range list.Items {
			if msg := notRunning(p, true); msg != "" || p.DeletionTimestamp != nil {
				return false, p.Name + ": " + cmpOrString(msg, "terminating")
			}
		}
		var reason string
		g.held, g.answers, reason = spread(ctx, ns, list.Items, shards, shard.FairShare(shards, replicas), claims)
		if reason != "" {
			return false, reason
		}
		ids := g.identities()
		for _, a := range g.answers {
			if !slices.Equal(a.Members, ids) {
				return false, fmt.Sprintf("%s sees members %q, the Pods are %q", a.pod, a.Members, ids)
			}
		}
		table, err := shard.Assign(shards, ids)
		if err != nil {
			return false, err.Error()
		}
		for i, want := range table {
			if got := g.held[i].identity; got != want {
				return false, fmt.Sprintf("shard %d held by %s, assigned to %s", i, got, want)
			}
		}
		return true, ""
	})
	return g
}

func cmpOrString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// termsBegun is the number of terms begun between two states: the sum
// over the shards of the rise of their tokens.
func termsBegun(before, after map[int]shardHolder) int {
	n := 0
	for i, h := range after {
		n += int(h.token - before[i].token)
	}
	return n
}

// fewestMoves is shard.FewestMoves from the holders before (a shard held
// by no one as "") to a table over members.
func fewestMoves(before map[int]shardHolder, members []string, n int) int {
	old := make(shard.Table, n)
	for i, h := range before {
		old[i] = h.identity
	}
	return shard.FewestMoves(old, members)
}

func ratio(moves, fewest int) float64 {
	if fewest == 0 {
		return 0
	}
	return float64(moves) / float64(fewest)
}

// shardRecordSeen is one record of a shard Lease as a watch delivered it.
type shardRecordSeen struct {
	holder string
	token  int64
	at     time.Time
}

// shardLeaseHistory is every record of the group's shard Leases a watch
// delivered, by shard, with when it arrived.
type shardLeaseHistory struct {
	mu      sync.Mutex
	records map[int][]shardRecordSeen
}

// watchShardLeases watches the shard Leases of the example release from
// their current version on, until ctx ends.
func watchShardLeases(t *testing.T, ctx context.Context, ns string, shards int) *shardLeaseHistory {
	t.Helper()
	list, err := cl.client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cl.client.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for i := range shards {
		byName[shardgroup.ShardRecord(fullName, i)] = i
	}
	h := &shardLeaseHistory{records: map[int][]shardRecordSeen{}}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			i, ok := byName[l.Name]
			if !ok {
				continue
			}
			r := shardRecordSeen{at: time.Now()}
			if l.Spec.HolderIdentity != nil {
				r.holder = *l.Spec.HolderIdentity
			}
			if l.Spec.LeaseTransitions != nil {
				r.token = int64(*l.Spec.LeaseTransitions)
			}
			h.mu.Lock()
			h.records[i] = append(h.records[i], r)
			h.mu.Unlock()
		}
	}()
	return h
}

// firstHolderAfter returns the first record of shard i that names a
// holder other than old.
func (h *shardLeaseHistory) firstHolderAfter(i int, old string) (shardRecordSeen, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records[i] {
		if r.holder != "" && r.holder != old {
			return r, true
		}
	}
	return shardRecordSeen{}, false
}

// holders are the holders shard i's records named in turn, up to the
// record that arrived at until, each once in a row ("": released).
func (h *shardLeaseHistory) holders(i int, until time.Time) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records[i] {
		if r.at.After(until) {
			break
		}
		if len(out) == 0 || out[len(out)-1] != r.holder {
			out = append(out, r.holder)
		}
	}
	return out
}

// log logs every record that arrived from from on: its shard, holder
// (the Pod's name, "" when released) and token, and when it arrived.
func (h *shardLeaseHistory) log(t *testing.T, from time.Time) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	type change struct {
		shard int
		shardRecordSeen
	}
	var all []change
	for i, rs := range h.records {
		prev := ""
		for k, r := range rs {
			if (k == 0 || r.holder != prev) && !r.at.Before(from) {
				all = append(all, change{i, r})
			}
			prev = r.holder
		}
	}
	sort.Slice(all, func(a, b int) bool { return all[a].at.Before(all[b].at) })
	var lines []string
	for _, c := range all {
		pod, _, _ := strings.Cut(c.holder, "_")
		lines = append(lines, fmt.Sprintf("+%v shard %d: %q token %d", c.at.Sub(from).Round(100*time.Millisecond), c.shard, pod, c.token))
	}
	t.Logf("the shard Leases' holders from then on:\n%s", strings.Join(lines, "\n"))
}

// lastNaming returns the last record of shard i that names holder and
// arrived before until.
func (h *shardLeaseHistory) lastNaming(i int, holder string, until time.Time) (shardRecordSeen, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var last shardRecordSeen
	found := false
	for _, r := range h.records[i] {
		if r.at.After(until) {
			break
		}
		if r.holder == holder {
			last, found = r, true
		}
	}
	return last, found
}
