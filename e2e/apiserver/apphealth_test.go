package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// On a Lease too, a leader whose app turns unhealthy releases at once: the
// standby leads with the next token within a second, the Lease names it,
// and the old leader's Pod gets a Warning Event saying why it stepped down.
func TestLeaseUnhealthyAppHandsLeadershipOver(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "app-health"
	kc := k.Kubeconfig(t, "")
	var healthy [2]atomic.Bool
	var all []*sidecartest.Sidecar
	for i, pod := range []string{"app-0", "app-1"} {
		healthy[i].Store(true)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if !healthy[i].Load() {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}))
		t.Cleanup(srv.Close)
		all = append(all, sidecartest.LeaseSidecar(t, kc, ns, name, pod, "--app-health-url", srv.URL,
			"--app-health-period", "100ms", "--app-health-failures", "3"))
	}
	old, token := sidecartest.AwaitSettledLeader(t, all, 15*time.Second)
	i := 0
	if old == all[1] {
		i = 1
	}

	healthy[i].Store(false)
	failed := time.Now()
	next, nextToken := sidecartest.AwaitLeader(t, sidecartest.Without(all, old), 5*time.Second)
	took := time.Since(failed)
	if nextToken != token+1 || took > time.Second {
		t.Fatalf("the standby led %v after the leader's app failed with token %d; want under 1s with %d", took, nextToken, token+1)
	}
	k.LeaseShows(t, ns, name, sidecartest.IdentityOf(t, next), nextToken)

	pod := []string{"app-0", "app-1"}[i]
	sidecartest.WaitTrue(t, "a Warning Event on "+pod+" about its unhealthy app", 15*time.Second, func() bool {
		list, err := k.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range list.Items {
			if ev.Action == "SteppedDownAppUnhealthy" && ev.Type == "Warning" && ev.Regarding.Name == pod &&
				strings.Contains(ev.Note, "app is unhealthy") {
				return true
			}
		}
		return false
	})
	t.Logf("hand-over on a Lease after the leader's app failed: %v", took.Round(time.Millisecond))
}
