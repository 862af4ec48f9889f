package apiserver

import (
	"fmt"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestLeaseShardCountChange changes a group's shard count by a rolling
// update on the Lease backend of a real API server, both ways (2 to 4,
// and back from 4 to 2): two replicas of the old count hold every shard,
// one of the new count joins and both run side by side for four lease
// durations, then the old ones stop. Every replica's GET /shards is
// sampled throughout: no key is ever held by two replicas at one instant,
// and the new replica holds every shard of its count within three lease
// durations of the old ones being told to stop.
func TestLeaseShardCountChange(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	kc := k.Kubeconfig(t, "")
	for _, c := range []struct{ from, to int }{{2, 4}, {4, 2}} {
		t.Run(fmt.Sprintf("%d to %d", c.from, c.to), func(t *testing.T) {
			ns := k.Namespace(t)
			pod := 0
			sidecartest.CountChange{
				From: c.from, To: c.to,
				Spawn: func(t testing.TB, extra ...string) *sidecartest.Sidecar {
					pod++
					env := []string{fmt.Sprintf("POD_NAME=app-%d", pod), "POD_NAMESPACE=" + ns}
					return sidecartest.Spawn(t, env, append([]string{"--backend", "lease", "--kubeconfig", kc, "--namespace", ns,
						"--lease-name", "billing", "--kube-api-qps", "50", "--kube-api-burst", "100"}, extra...)...)
				},
				Mix:    4 * sidecartest.LeaseDuration,
				Within: 3 * sidecartest.LeaseDuration,
			}.Run(t)
		})
	}
}
