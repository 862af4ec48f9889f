package apiserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestNewcomerAfterALeaseDeletionNeverLeadsBesideTheLastHolder deletes
// the Lease under a live leader while a new sidecar starts, at offsets
// from 100ms before the deletion to 100ms after it, and asks both GET
// /leader every 10ms: never two leader:true answers in one sweep. The
// newcomer cannot tell a Lease never created from one deleted, so it
// claims a Lease it had to create only a lease duration later; the
// leader reads the Lease at the watch's signal and recreates it or steps
// down. Rounds run in parallel, each in a namespace of its own.
func TestNewcomerAfterALeaseDeletionNeverLeadsBesideTheLastHolder(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	for round := range 6 {
		offset := time.Duration(rand.Int64N(int64(200*time.Millisecond))) - 100*time.Millisecond
		t.Run(fmt.Sprintf("%d at %v", round, offset.Round(time.Millisecond)), func(t *testing.T) {
			t.Parallel()
			ns, kc := k.Namespace(t), k.Kubeconfig(t, "")
			a := sidecartest.LeaseSidecar(t, kc, ns, "billing", "a")
			sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{a}, 3*sidecartest.LeaseDuration)
			var members sidecartest.Members
			members.Add("a", a, 0)
			var claims sidecartest.ClaimLog
			halt := claims.SweepUntilHalted(sidecartest.SweepEvery, members.All)
			defer halt()

			var deleted sync.WaitGroup
			deleted.Go(func() {
				if offset < 0 {
					time.Sleep(-offset)
				}
				if err := k.Client.CoordinationV1().Leases(ns).Delete(context.Background(), "billing", metav1.DeleteOptions{}); err != nil {
					t.Errorf("delete the Lease: %v", err)
				}
			})
			if offset > 0 {
				time.Sleep(offset)
			}
			c := sidecartest.LeaseSidecar(t, kc, ns, "billing", "c")
			members.Add("c", c, 0)
			deleted.Wait()
			time.Sleep(3 * sidecartest.LeaseDuration)
			halt()
			claims.Check(t)
			if _, tok := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{a, c}, 2*sidecartest.LeaseDuration); tok < 1 {
				t.Fatalf("no leader after the round (token %d)", tok)
			}
		})
	}
}
