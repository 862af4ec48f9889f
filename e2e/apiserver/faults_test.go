package apiserver

import (
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

func leaseSidecars(t *testing.T, k *sidecartest.KubeEnv, ns, name string) []*sidecartest.Sidecar {
	t.Helper()
	kc := k.Kubeconfig(t, "")
	var all []*sidecartest.Sidecar
	for _, pod := range []string{"app-0", "app-1", "app-2"} {
		all = append(all, sidecartest.LeaseSidecar(t, kc, ns, name, pod))
	}
	return all
}

func TestLeaseAPIServerDownLeaderStopsClaimingInTime(t *testing.T) {
	t.Parallel()
	k := sidecartest.OwnKube(t) // the test stops it
	ns, name := k.Namespace(t), "outage"
	all := leaseSidecars(t, k, ns, name)
	old, token := sidecartest.AwaitSettledLeader(t, all, 15*time.Second)
	rec := sidecartest.Record(t, all)

	// Whatever happens, start it again, so that the sidecars stop cleanly.
	api := k.Env.ControlPlane.APIServer
	stopped := make(chan error, 1)
	var stopTook time.Duration
	down := true
	t.Cleanup(func() {
		if down {
			<-stopped
			if err := api.Start(); err != nil {
				t.Errorf("restarting kube-apiserver: %v", err)
			}
		}
	})
	stopAt := time.Now()
	go func() { // returns once open watches are cut, two seconds on
		err := api.Stop()
		stopTook = time.Since(stopAt)
		stopped <- err
	}()

	var lastRenew time.Time
	for {
		st, err := old.Leader()
		if err != nil {
			t.Fatalf("the leader's local API failed while the API server was down: %v", err)
		}
		if !st.Leader {
			break
		}
		lastRenew = st.ValidUntil.Add(-sidecartest.RenewDeadline)
		if time.Since(stopAt) > sidecartest.LeaseDuration {
			t.Fatalf("still leader %v after the API server stopped", time.Since(stopAt))
		}
		time.Sleep(10 * time.Millisecond)
	}
	flip := time.Since(stopAt)
	if flip > sidecartest.RenewDeadline+300*time.Millisecond || flip >= sidecartest.LeaseDuration-sidecartest.RetryPeriod {
		t.Fatalf("leader:false %v after the API server stopped, want at most %v (renew deadline) and before %v",
			flip, sidecartest.RenewDeadline+300*time.Millisecond, sidecartest.LeaseDuration-sidecartest.RetryPeriod)
	}
	t.Logf("leader:false %v after the API server stopped (last renewal began %v after the stop)",
		flip.Round(time.Millisecond), lastRenew.Sub(stopAt).Round(time.Millisecond))

	for end := stopAt.Add(sidecartest.LeaseDuration + 2*time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if ls, sts := sidecartest.Leaders(t, all); len(ls) > 0 {
			t.Fatalf("leader %+v %v after the API server stopped", sts[0], time.Since(stopAt))
		}
	}
	select {
	case err := <-stopped:
		stopped <- err // for the cleanup, had Start failed
		if err != nil {
			t.Fatalf("stopping kube-apiserver: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("kube-apiserver still stopping after 30s")
	}

	startAt := time.Now()
	if err := api.Start(); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
	down = false
	up := time.Now()
	// Every candidate tries again within 1.2 retry periods: the holder
	// renews its own record (same token), or a standby, which has seen that
	// record unchanged since before the outage, takes it over (token+1).
	// A lease duration on top covers a standby that must wait out a record
	// it saw change after the restart.
	leader, token2 := sidecartest.AwaitLeader(t, all, sidecartest.LeaseDuration+2*sidecartest.RetryPeriod)
	t.Logf("API server stopped in %v, started in %v; single leader %v after Start returned (same holder: %v, token %d -> %d)",
		stopTook.Round(time.Millisecond), up.Sub(startAt).Round(time.Millisecond), time.Since(up).Round(time.Millisecond), leader == old, token, token2)
	if (leader == old && token2 != token) || (leader != old && token2 != token+1) {
		t.Fatalf("after the outage: same holder %v with token %d, previous token %d", leader == old, token2, token)
	}
	sidecartest.Steady(t, all, leader, token2, 2*sidecartest.RetryPeriod)
	k.LeaseShows(t, ns, name, sidecartest.IdentityOf(t, leader), token2)
	rec.Check(t, token, 0)
	sidecartest.AllAlive(t, all)
}
