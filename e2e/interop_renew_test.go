package e2e

import (
	"sync"
	"syscall"
	"testing"
	"time"
)

// sampleClientGo logs a claim for every 2ms in which c says it leads,
// until stop is closed.
func sampleClientGo(l *claimLog, wg *sync.WaitGroup, stop <-chan struct{}, c *clientGoCandidate) {
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			now := time.Now()
			if c.leading.Load() {
				l.add(claim{c.identity, term{0, c.token.Load()}, -1, now, now})
			}
		}
	})
}

// A sidecar leader that renews once per renew interval, not once per
// retry period as client-go does, keeps a client-go candidate on the same
// Lease out: client-go takes a Lease over only once it has seen the record
// unchanged for its lease duration, and every renewal changes renewTime.
// Both the default interval (a third of the 3s lease) and the largest the
// sidecar accepts (renew deadline - 1.2 x retry period, less 1ms) are
// tried, over five lease durations. When the sidecar stops renewing
// (SIGSTOP), client-go takes over with the next token, and no sample ever
// shows two terms claiming at once.
func TestLeaseClientGoStaysOutWhileTheSidecarRenews(t *testing.T) {
	k := kube(t)
	kc := k.kubeconfig(t, "")
	const window = 5 * leaseDuration
	for _, c := range []struct {
		name     string
		interval time.Duration // 0: the sidecar's default
		expect   time.Duration
	}{
		{"default renew interval", 0, leaseDuration / 3},
		{"largest renew interval", renewDeadline - 6*retryPeriod/5 - time.Millisecond, renewDeadline - 6*retryPeriod/5 - time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns, name := k.namespace(t), "renewing"
			var extra []string
			if c.interval > 0 {
				extra = []string{"--renew-interval", c.interval.String()}
			}
			sc := leaseSidecar(t, kc, ns, name, "app-0", extra...)
			_, token := awaitLeader(t, []*sidecar{sc}, 15*time.Second)
			cg := startClientGo(t, k, ns, name, "client-go")

			var log claimLog
			stop := make(chan struct{})
			var wg sync.WaitGroup
			log.sample(&wg, stop, sc, func(error) bool { return true }) // a frozen sidecar times out: keep sampling
			sampleClientGo(&log, &wg, stop, cg)

			// Every renewal the API server stores, for five lease durations.
			renewals := map[time.Time]bool{}
			for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				l := k.lease(t, ns, name)
				if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != identityOf(t, sc) {
					t.Fatalf("the Lease names %v, not the sidecar", l.Spec.HolderIdentity)
				}
				renewals[l.Spec.RenewTime.Time] = true
				if cg.leading.Load() {
					t.Fatal("client-go leads while the sidecar renews")
				}
			}
			st, err := sc.leader()
			if err != nil || !st.Leader || *st.Token != token {
				t.Fatalf("after %v the sidecar answers %+v %v, want leader with token %d", window, st, err, token)
			}
			// At most one renewal per renew interval, plus the one seen
			// first and one for the window's edges (once per retry period
			// would be 30), and at least one per renew deadline, or the
			// sidecar would have stopped claiming.
			if n, most, least := len(renewals), int(window/c.expect)+2, int(window/renewDeadline); n > most || n < least {
				t.Fatalf("%d renewals in %v, want %d to %d at a renew interval of %v", n, window, least, most, c.expect)
			}

			// The sidecar stops renewing: client-go waits out the lease,
			// then leads with the next token.
			sc.signal(syscall.SIGSTOP)
			frozen := time.Now()
			waitTrue(t, "client-go takes over", 2*leaseDuration+time.Second, cg.leading.Load)
			took := time.Since(frozen)
			if cg.token.Load() != token+1 {
				t.Fatalf("client-go leads with token %d after the sidecar's %d", cg.token.Load(), token)
			}
			sc.signal(syscall.SIGCONT)
			time.Sleep(200 * time.Millisecond)
			close(stop)
			wg.Wait()
			terms := log.check(t)
			if terms[term{0, token}] == 0 || terms[term{0, token + 1}] == 0 {
				t.Fatalf("claims per term %v: want both the sidecar's %d and client-go's %d", terms, token, token+1)
			}
			t.Logf("%d renewals in %v; client-go took over %v after the sidecar froze; claims per term %v",
				len(renewals), window, took.Round(time.Millisecond), terms)
		})
	}
}
