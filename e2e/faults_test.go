package e2e

import (
	"sync"
	"testing"
	"time"
)

// answer is one GET /leader answer from all[who], sent and received at
// the two instants.
type answer struct {
	who      int
	st       state
	sent, at time.Time
}

// recorder polls every sidecar in the background and keeps every answer.
type recorder struct {
	mu      sync.Mutex
	answers []answer
	failed  []error // a live sidecar that did not answer
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

func record(t *testing.T, all []*sidecar) *recorder {
	r := &recorder{stop: make(chan struct{})}
	for i, s := range all {
		r.wg.Go(func() {
			for {
				select {
				case <-r.stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				sent := time.Now()
				st, err := s.leader()
				r.mu.Lock()
				if err == nil {
					r.answers = append(r.answers, answer{i, st, sent, time.Now()})
				} else if s.alive() {
					r.failed = append(r.failed, err)
				}
				r.mu.Unlock()
			}
		})
	}
	t.Cleanup(r.halt)
	return r
}

func (r *recorder) halt() {
	r.once.Do(func() { close(r.stop) })
	r.wg.Wait()
}

// check stops the recorder and fails t if a live sidecar did not answer,
// if a claim carried a token below floor, if two sidecars claimed the same
// token, or if a term was still claimed more than overlap after the first
// claim of a newer term had arrived (0: never after). It returns the
// claims, the first answer of each term, and the longest overlap seen.
func (r *recorder) check(t *testing.T, floor int64, overlap time.Duration) ([]answer, map[int64]time.Time, time.Duration) {
	t.Helper()
	r.halt()
	if len(r.failed) > 0 {
		t.Fatalf("a live sidecar did not answer GET /leader: %v", r.failed[0])
	}
	var claims []answer
	first := map[int64]time.Time{}
	holder := map[int64]int{}
	for _, a := range r.answers {
		if !a.st.Leader {
			continue
		}
		if a.st.Token == nil {
			t.Fatalf("sidecar %d claimed leadership without a token", a.who)
		}
		tok := *a.st.Token
		if tok < floor {
			t.Fatalf("sidecar %d claimed token %d, below %d seen before", a.who, tok, floor)
		}
		if h, ok := holder[tok]; ok && h != a.who {
			t.Fatalf("sidecars %d and %d both claimed token %d", h, a.who, tok)
		}
		holder[tok] = a.who
		if f, ok := first[tok]; !ok || a.at.Before(f) {
			first[tok] = a.at
		}
		claims = append(claims, a)
	}
	var longest time.Duration
	for _, c := range claims {
		for tok, f := range first {
			if tok > *c.st.Token && c.sent.After(f) {
				longest = max(longest, c.sent.Sub(f))
			}
		}
	}
	if longest > overlap {
		t.Fatalf("an older term was still claimed %v after a newer term's first claim (allowed: %v)", longest, overlap)
	}
	return claims, first, longest
}

// awaitSettled waits until every sidecar names leader as the holder (all
// have read the record and its token) and the leader has renewed twice
// since, so that a fault meets a running election rather than one still
// starting up (a standby's watch takes tens of milliseconds to start).
func awaitSettled(t *testing.T, all []*sidecar, leader *sidecar) {
	t.Helper()
	id := identityOf(t, leader)
	for _, s := range all {
		waitTrue(t, "every sidecar has seen the record", 10*time.Second, func() bool {
			st, err := s.leader()
			return err == nil && st.Holder == id
		})
	}
	var last time.Time
	renewals := -1
	waitTrue(t, "the leader renews twice", 2*renewInterval+time.Second, func() bool {
		if st, err := leader.leader(); err == nil && st.Leader && st.ValidUntil.After(last) {
			last, renewals = *st.ValidUntil, renewals+1
		}
		return renewals >= 2
	})
}

func allAlive(t *testing.T, all []*sidecar) {
	t.Helper()
	for _, s := range all {
		if !s.alive() {
			t.Fatalf("sidecar %d exited: %v\n%s", s.cmd.Process.Pid, s.exitErr, s.logs.String())
		}
	}
}

func leaseSidecars(t *testing.T, k *kubeEnv, ns, name string) []*sidecar {
	t.Helper()
	kc := k.kubeconfig(t, "")
	var all []*sidecar
	for _, pod := range []string{"app-0", "app-1", "app-2"} {
		all = append(all, leaseSidecar(t, kc, ns, name, pod))
	}
	return all
}

func TestLeaseAPIServerDownLeaderStopsClaimingInTime(t *testing.T) {
	k := kube(t)
	ns, name := k.namespace(t), "outage"
	all := leaseSidecars(t, k, ns, name)
	old, token := awaitLeader(t, all, 15*time.Second)
	awaitSettled(t, all, old)
	rec := record(t, all)

	// The envtest instance is shared: whatever happens, start it again.
	api := k.env.ControlPlane.APIServer
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
		st, err := old.leader()
		if err != nil {
			t.Fatalf("the leader's local API failed while the API server was down: %v", err)
		}
		if !st.Leader {
			break
		}
		lastRenew = st.ValidUntil.Add(-renewDeadline)
		if time.Since(stopAt) > leaseDuration {
			t.Fatalf("still leader %v after the API server stopped", time.Since(stopAt))
		}
		time.Sleep(10 * time.Millisecond)
	}
	flip := time.Since(stopAt)
	if flip > renewDeadline+300*time.Millisecond || flip >= leaseDuration-retryPeriod {
		t.Fatalf("leader:false %v after the API server stopped, want at most %v (renew deadline) and before %v",
			flip, renewDeadline+300*time.Millisecond, leaseDuration-retryPeriod)
	}
	t.Logf("leader:false %v after the API server stopped (last renewal began %v after the stop)",
		flip.Round(time.Millisecond), lastRenew.Sub(stopAt).Round(time.Millisecond))

	for end := stopAt.Add(leaseDuration + 2*time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if ls, sts := leaders(t, all); len(ls) > 0 {
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
	leader, token2 := awaitLeader(t, all, leaseDuration+2*retryPeriod)
	t.Logf("API server stopped in %v, started in %v; single leader %v after Start returned (same holder: %v, token %d -> %d)",
		stopTook.Round(time.Millisecond), up.Sub(startAt).Round(time.Millisecond), time.Since(up).Round(time.Millisecond), leader == old, token, token2)
	if (leader == old && token2 != token) || (leader != old && token2 != token+1) {
		t.Fatalf("after the outage: same holder %v with token %d, previous token %d", leader == old, token2, token)
	}
	steady(t, all, leader, token2, 2*retryPeriod)
	leaseShows(t, k, ns, name, identityOf(t, leader), token2)
	rec.check(t, token, 0)
	allAlive(t, all)
}
