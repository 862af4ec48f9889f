//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestExampleChartShardCountUpgrade installs the example chart in shard
// mode with 2 shards over 3 replicas, then changes the count to 4 with
// helm upgrade, a rolling update in which Pods of both counts run side by
// side. Every Pod's GET /shards is sampled throughout, old and new alike,
// and no two Pods ever claim intersecting key ranges at one instant,
// whatever their counts (sidecartest.RangeTerms); once the rollout is
// done, the 4 shards are held by the new Pods, each by one, as their
// Leases say.
func TestExampleChartShardCountUpgrade(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	const replicas = 3
	install(t, ctx, ns, "--set", fmt.Sprintf("replicaCount=%d,sidecar.sharding.enabled=true,sidecar.sharding.shards=2", replicas),
		"--set", "app.args={--sidecar=$(LEADER_SIDECAR_URL),--db=/data/results.db,--resource=example,--name=$(POD_NAME),--shards}",
		"--wait", "--timeout", "2m")
	pods := runningPods(t, ctx, ns, replicas, true)
	eventually(t, ctx, "2 shards held, one Pod each", func() (bool, string) {
		_, _, reason := spread(ctx, ns, pods, 2, 1, newClaimLog())
		return reason == "", reason
	})

	// Every Pod of the release, sampled until the rollout is over.
	terms := sidecartest.NewRangeTerms()
	sampling, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	sweeps := 0
	wg.Go(func() {
		for sampling.Err() == nil {
			list, err := cl.client.CoreV1().Pods(ns).List(sampling, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
			if err != nil {
				continue
			}
			var names []string
			for _, p := range list.Items {
				if p.Status.Phase == "Running" {
					names = append(names, p.Name)
				}
			}
			answers, _ := sweep(sampling, ns, names) // a Pod that is stopping may not answer
			for _, a := range answers {
				if err := terms.Add(a.pod, a.ShardsJSON, a.sent, a.answered); err != nil {
					t.Error(err)
				}
			}
			sweeps++
		}
	})
	chart := filepath.Join(cl.root, "charts", "leader-sidecar-example")
	upgraded := time.Now()
	cl.run(t, ctx, cl.helm, "upgrade", release, chart, "--namespace", ns, "--reuse-values",
		"--set", "sidecar.sharding.shards=4", "--wait", "--timeout", "3m")
	var took time.Duration
	eventually(t, ctx, "4 shards held by the new Pods, at most 2 each", func() (bool, string) {
		now := runningPods(t, ctx, ns, replicas, true)
		held, answers, reason := spread(ctx, ns, now, 4, 2, newClaimLog())
		if reason != "" {
			return false, reason
		}
		for _, a := range answers {
			if a.Shards != 4 {
				return false, fmt.Sprintf("%s runs %d shards", a.pod, a.Shards)
			}
		}
		took = time.Since(upgraded)
		return len(held) == 4, ""
	})
	time.Sleep(2 * time.Second) // a few more sweeps of the settled group
	stop()
	wg.Wait()
	counts := terms.Counts()
	if counts[2] == 0 || counts[4] == 0 {
		t.Fatalf("terms sampled by count: %v; want terms of both 2 and 4 shards", counts)
	}
	n, overlaps := terms.Overlaps(t)
	t.Logf("helm upgrade from 2 to 4 shards: every shard held by the new Pods %v after it began; %d sweeps of every Pod saw %d terms (by count %v), %d pairs holding the same keys at once",
		took.Round(time.Millisecond), sweeps, n, counts, overlaps)
}
