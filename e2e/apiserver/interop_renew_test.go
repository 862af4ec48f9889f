package apiserver

import (
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// sampleClientGo logs a claim for every 2ms in which c says it leads,
// until stop is closed.
func sampleClientGo(l *sidecartest.ClaimLog, wg *sync.WaitGroup, stop <-chan struct{}, c *clientGoCandidate) {
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			now := time.Now()
			if c.leading.Load() {
				l.Add(sidecartest.Claim{Who: c.identity, Term: sidecartest.Term{Token: c.token.Load()}, Sweep: -1, Sent: now, Answer: now})
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
	t.Parallel()
	k := sidecartest.Kube(t)
	kc := k.Kubeconfig(t, "")
	const window = 5 * sidecartest.LeaseDuration
	for _, c := range []struct {
		name     string
		interval time.Duration // 0: the sidecar's default
		expect   time.Duration
	}{
		{"default renew interval", 0, sidecartest.LeaseDuration / 3},
		{"largest renew interval", sidecartest.RenewDeadline - 6*sidecartest.RetryPeriod/5 - time.Millisecond, sidecartest.RenewDeadline - 6*sidecartest.RetryPeriod/5 - time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns, name := k.Namespace(t), "renewing"
			var extra []string
			if c.interval > 0 {
				extra = []string{"--renew-interval", c.interval.String()}
			}
			sc := sidecartest.LeaseSidecar(t, kc, ns, name, "app-0", extra...)
			_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{sc}, 15*time.Second)
			cg := startClientGo(t, k, ns, name, "client-go")

			var log sidecartest.ClaimLog
			stop := make(chan struct{})
			var wg sync.WaitGroup
			log.Sample(&wg, stop, sc, func(error) bool { return true }) // a frozen sidecar times out: keep sampling
			sampleClientGo(&log, &wg, stop, cg)

			// Every renewal the API server stores, for five lease durations.
			renewals := map[time.Time]bool{}
			for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				l := k.Lease(t, ns, name)
				if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != sidecartest.IdentityOf(t, sc) {
					t.Fatalf("the Lease names %v, not the sidecar", l.Spec.HolderIdentity)
				}
				renewals[l.Spec.RenewTime.Time] = true
				if cg.leading.Load() {
					t.Fatal("client-go leads while the sidecar renews")
				}
			}
			// A renewal the loaded API server answers after the renew
			// deadline ends the sidecar's term, and it starts the next one
			// itself: what counts here is that the Lease named it all along
			// and client-go never led.
			st, err := sc.Leader()
			if err != nil || !st.Leader || *st.Token < token {
				t.Fatalf("after %v the sidecar answers %+v %v, want leader with token %d or above", window, st, err, token)
			}
			if *st.Token != token {
				// Only after a request that failed: a renewal that came too
				// late on its own (a renew interval the sidecar should not
				// have accepted) fails here.
				if *st.Token != token+1 || !strings.Contains(sc.Logs(), `"msg":"store request failed"`) {
					t.Fatalf("the sidecar went from token %d to %d in the window, not after a failed store request", token, *st.Token)
				}
				t.Logf("a store request failed and the sidecar restarted its term: token %d, then %d", token, *st.Token)
				token = *st.Token
			}
			// At most one renewal per renew interval, plus the one seen
			// first and one for the window's edges (once per retry period
			// would be 30), and at least one per renew deadline, or the
			// sidecar would have stopped claiming.
			if n, most, least := len(renewals), int(window/c.expect)+2, int(window/sidecartest.RenewDeadline); n > most || n < least {
				t.Fatalf("%d renewals in %v, want %d to %d at a renew interval of %v", n, window, least, most, c.expect)
			}

			// The sidecar stops renewing: client-go waits out the lease,
			// then leads with the next token.
			sc.Signal(syscall.SIGSTOP)
			frozen := time.Now()
			sidecartest.WaitTrue(t, "client-go takes over", 2*sidecartest.LeaseDuration+time.Second, cg.leading.Load)
			took := time.Since(frozen)
			if cg.token.Load() != token+1 {
				t.Fatalf("client-go leads with token %d after the sidecar's %d", cg.token.Load(), token)
			}
			sc.Signal(syscall.SIGCONT)
			time.Sleep(200 * time.Millisecond)
			close(stop)
			wg.Wait()
			terms := log.Check(t)
			if terms[sidecartest.Term{Token: token}] == 0 || terms[sidecartest.Term{Token: token + 1}] == 0 {
				t.Fatalf("claims per term %v: want both the sidecar's %d and client-go's %d", terms, token, token+1)
			}
			t.Logf("%d renewals in %v; client-go took over %v after the sidecar froze; claims per term %v",
				len(renewals), window, took.Round(time.Millisecond), terms)
		})
	}
}
