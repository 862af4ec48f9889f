package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leaseShows fails t unless the Lease in the API server names holder and
// carries token as leaseTransitions.
func leaseShows(t *testing.T, k *kubeEnv, ns, name, holder string, token int64) {
	t.Helper()
	spec := k.lease(t, ns, name).Spec
	if spec.HolderIdentity == nil || *spec.HolderIdentity != holder ||
		spec.LeaseTransitions == nil || int64(*spec.LeaseTransitions) != token {
		t.Fatalf("Lease spec holder=%v transitions=%v, want %q and %d",
			deref(spec.HolderIdentity), deref(spec.LeaseTransitions), holder, token)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func identityOf(t *testing.T, s *sidecar) string {
	t.Helper()
	st, err := s.leader()
	if err != nil {
		t.Fatal(err)
	}
	return st.Identity
}

func TestLeaseSidecarsElectAndFailOver(t *testing.T) {
	k := kube(t)
	ns, name := k.namespace(t), "billing"
	kc := k.kubeconfig(t, "")
	var all []*sidecar
	for _, pod := range []string{"app-0", "app-1", "app-2"} {
		all = append(all, leaseSidecar(t, kc, ns, name, pod))
	}
	first, token := awaitLeader(t, all, 15*time.Second)
	leaseShows(t, k, ns, name, identityOf(t, first), token)
	if st, _ := first.leader(); st.ValidUntil == nil {
		t.Fatal("leader without validUntil")
	}

	// kill -9: nobody releases; a standby waits out the lease.
	killed := time.Now()
	first.signal(syscall.SIGKILL)
	first.waitExit(10 * time.Second)
	rest := without(all, first)
	second, token2 := awaitLeader(t, rest, 3*leaseDuration)
	waited := time.Since(killed)
	if token2 != token+1 {
		t.Fatalf("token after kill -9: %d, want %d", token2, token+1)
	}
	if waited < leaseDuration-renewInterval {
		t.Fatalf("took over %v after kill -9, before the lease could have run out", waited)
	}
	leaseShows(t, k, ns, name, identityOf(t, second), token2)
	t.Logf("fail-over after kill -9: %v (lease %v)", waited.Round(time.Millisecond), leaseDuration)

	// SIGTERM: the leader releases and the watch wakes the standby.
	signalled := time.Now()
	second.signal(syscall.SIGTERM)
	third, token3 := awaitLeader(t, without(rest, second), leaseDuration)
	took := time.Since(signalled)
	if code := second.waitExit(10 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit status %d", code)
	}
	if token3 != token2+1 || took > time.Second {
		t.Fatalf("after SIGTERM: token %d after %v, want %d within about a second", token3, took, token2+1)
	}
	leaseShows(t, k, ns, name, identityOf(t, third), token3)
	t.Logf("hand-off after SIGTERM: %v", took.Round(time.Millisecond))
}

func TestLeaseLeadershipIsRecordedAsEvents(t *testing.T) {
	k := kube(t)
	ns, name := k.namespace(t), "events"
	s := leaseSidecar(t, k.kubeconfig(t, ""), ns, name, "worker-7")
	_, token := awaitLeader(t, []*sidecar{s}, 15*time.Second)
	s.signal(syscall.SIGTERM)
	s.waitExit(10 * time.Second)

	want := map[string]string{"BecameLeader": "became leader", "StoppedLeading": "stopped leading"}
	deadline := time.Now().Add(15 * time.Second)
	for len(want) > 0 && time.Now().Before(deadline) {
		list, err := k.client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range list.Items {
			note, ok := want[ev.Action]
			if !ok || ev.Reason != "LeaderElection" || ev.Regarding.Kind != "Pod" || ev.Regarding.Name != "worker-7" ||
				ev.Related == nil || ev.Related.Kind != "Lease" || ev.Related.Name != name ||
				!strings.Contains(ev.Note, note) || ev.ReportingController != "leader-sidecar" {
				continue
			}
			delete(want, ev.Action)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(want) > 0 {
		t.Fatalf("no Event for %v about Pod worker-7 related to Lease %s (term %d)", want, name, token)
	}
}
