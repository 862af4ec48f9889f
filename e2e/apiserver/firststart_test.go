package apiserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
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

// A rollout that stops the first sidecar of a new Lease before its claim
// begins (an upgrade right after an install) costs no further lease: the
// stopped sidecar releases the Lease it created, unclaimed, once its
// claim could have begun, and the sidecar of the new revision, started
// two thirds of a lease after the Lease was created, leads then with the
// next token, sooner than a lease after it started, which is the earliest
// it could have led by waiting the Lease out. Both are swept every 10ms:
// never two leaders, and no claim of the token never claimed.
func TestStoppedBeforeTheFirstClaimTheLeaseIsReleasedWhenThatClaimCouldBegin(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, kc := k.Namespace(t), k.Kubeconfig(t, "")
	launch := func(pod, rev string) *sidecartest.Sidecar {
		s := sidecartest.Spawn(t, []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + ns, "POD_TEMPLATE_HASH=" + rev},
			"--backend", "lease", "--kubeconfig", kc, "--lease-name", "billing")
		s.WaitServing()
		return s
	}
	first := launch("old-0", "old")
	id := sidecartest.IdentityOf(t, first)
	sidecartest.WaitTrue(t, "the first sidecar creates the Lease", 2*sidecartest.LeaseDuration, func() bool {
		st, err := first.Leader()
		return err == nil && st.Holder == id
	})
	created := time.Now()
	var members sidecartest.Members
	members.Add("old-0", first, 0)
	var claims sidecartest.ClaimLog
	halt := claims.SweepUntilHalted(sidecartest.SweepEvery, members.All)
	defer halt()

	time.Sleep(sidecartest.LeaseDuration/6 - time.Since(created))
	if st, err := first.Leader(); err != nil || st.Leader {
		t.Fatalf("the first sidecar answers %+v %v before its claim could begin", st, err)
	}
	first.Signal(syscall.SIGTERM)
	time.Sleep(2*sidecartest.LeaseDuration/3 - time.Since(created))
	started := time.Now()
	next := launch("new-1", "new")
	members.Add("new-1", next, 0)
	sidecartest.AwaitToken(t, []*sidecartest.Sidecar{next}, 2, 2*sidecartest.LeaseDuration)
	led := time.Since(started)
	if led >= sidecartest.LeaseDuration {
		t.Fatalf("the new sidecar led %v after it started, no sooner than by waiting out the Lease (%v)", led, sidecartest.LeaseDuration)
	}
	if code := first.WaitExit(10 * time.Second); code != 0 {
		t.Fatalf("the stopped sidecar exited %d", code)
	}
	if !strings.Contains(first.Logs(), "released the record it created, never having claimed it") {
		t.Fatalf("the stopped sidecar did not release the Lease it created:\n%s", first.Logs())
	}
	time.Sleep(200 * time.Millisecond) // the sweeps see the new term
	halt()
	if terms := claims.Check(t); terms[sidecartest.Term{Token: 1}] != 0 || terms[sidecartest.Term{Token: 2}] == 0 {
		t.Fatalf("claims per term %v: want none of token 1, which was never claimed, and some of token 2", terms)
	}
	t.Logf("the new sidecar led %v after it started, %v after the Lease was created", led.Round(time.Millisecond), time.Since(created).Round(time.Millisecond))
}
