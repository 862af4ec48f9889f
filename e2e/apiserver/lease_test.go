package apiserver

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

func TestLeaseSidecarsElectAndFailOver(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "billing"
	kc := k.Kubeconfig(t, "")
	var all []*sidecartest.Sidecar
	for _, pod := range []string{"app-0", "app-1", "app-2"} {
		all = append(all, sidecartest.LeaseSidecar(t, kc, ns, name, pod))
	}
	first, token := sidecartest.AwaitLeader(t, all, 15*time.Second)
	k.LeaseShows(t, ns, name, sidecartest.IdentityOf(t, first), token)
	if st, _ := first.Leader(); st.ValidUntil == nil {
		t.Fatal("leader without validUntil")
	}

	// kill -9: nobody releases; a standby waits out the lease.
	killed := time.Now()
	first.Signal(syscall.SIGKILL)
	first.WaitExit(10 * time.Second)
	rest := sidecartest.Without(all, first)
	second, token2 := sidecartest.AwaitLeader(t, rest, 3*sidecartest.LeaseDuration)
	waited := time.Since(killed)
	if token2 != token+1 {
		t.Fatalf("token after kill -9: %d, want %d", token2, token+1)
	}
	if waited < sidecartest.LeaseDuration-sidecartest.RenewInterval {
		t.Fatalf("took over %v after kill -9, before the lease could have run out", waited)
	}
	k.LeaseShows(t, ns, name, sidecartest.IdentityOf(t, second), token2)
	t.Logf("fail-over after kill -9: %v (lease %v)", waited.Round(time.Millisecond), sidecartest.LeaseDuration)

	// SIGTERM: the leader releases and the watch wakes the standby.
	signalled := time.Now()
	second.Signal(syscall.SIGTERM)
	third, token3 := sidecartest.AwaitLeader(t, sidecartest.Without(rest, second), sidecartest.LeaseDuration)
	took := time.Since(signalled)
	if code := second.WaitExit(10 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit status %d", code)
	}
	if token3 != token2+1 || took > time.Second {
		t.Fatalf("after SIGTERM: token %d after %v, want %d within about a second", token3, took, token2+1)
	}
	k.LeaseShows(t, ns, name, sidecartest.IdentityOf(t, third), token3)
	t.Logf("hand-off after SIGTERM: %v", took.Round(time.Millisecond))
}

func TestLeaseLeadershipIsRecordedAsEvents(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "events"
	s := sidecartest.LeaseSidecar(t, k.Kubeconfig(t, ""), ns, name, "worker-7")
	_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 15*time.Second)
	s.Signal(syscall.SIGTERM)
	s.WaitExit(10 * time.Second)

	want := map[string]string{"BecameLeader": "became leader", "StoppedLeading": "stopped leading"}
	deadline := time.Now().Add(15 * time.Second)
	for len(want) > 0 && time.Now().Before(deadline) {
		list, err := k.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
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
