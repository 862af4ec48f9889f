package apiserver

import (
	"context"
	"fmt"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

func (c *chaos) label(s *sidecartest.Sidecar, tok int64) string {
	return fmt.Sprintf("%s:%d", c.member(s).pod, tok)
}

// expectNext waits for exactly one leader with token want among live and
// fails t unless it is not old (when old is non-nil).
func (c *chaos) expectNext(old *sidecartest.Sidecar, want int64, from time.Time) (*sidecartest.Sidecar, time.Duration) {
	c.t.Helper()
	s := sidecartest.AwaitToken(c.t, c.live(), want, recoveryBound-time.Since(from))
	took := time.Since(from)
	if old != nil && s == old {
		c.t.Fatalf("the old leader %s leads again with token %d", c.member(old).pod, want)
	}
	return s, took
}

func (c *chaos) kill(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	t := c.t
	t.Helper()
	m := c.member(old)
	m.killed.Store(true)
	at := time.Now()
	old.Signal(syscall.SIGKILL)
	old.WaitExit(5 * time.Second)
	s, took := c.expectNext(old, tok+1, at)
	if took < sidecartest.LeaseDuration-sidecartest.RenewInterval-sidecartest.RetryPeriod {
		t.Fatalf("taken over %v after the kill, before the lease could have run out", took)
	}
	sidecartest.Steady(t, c.live(), s, tok+1, settledFor)
	n := c.add()
	sidecartest.Steady(t, c.live(), s, tok+1, sidecartest.RetryPeriod)
	return faultResult{fault: "kill", before: c.label(old, tok), after: c.label(s, tok+1), demoted: -1, recovered: took,
		note: "replacement " + n.pod + " joined"}, s, tok + 1
}

func (c *chaos) pause(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	t := c.t
	t.Helper()
	m := c.member(old)
	m.paused.Store(true)
	at := time.Now()
	old.Signal(syscall.SIGSTOP)
	s, took := c.expectNext(old, tok+1, at)
	if took < sidecartest.LeaseDuration-sidecartest.RenewInterval-sidecartest.RetryPeriod {
		t.Fatalf("taken over %v after the pause, before the lease could have run out", took)
	}
	if d := sidecartest.LeaseDuration + 500*time.Millisecond - time.Since(at); d > 0 {
		time.Sleep(d)
	}
	cont := time.Now()
	old.Signal(syscall.SIGCONT)
	m.paused.Store(false)
	sidecartest.Steady(t, c.live(), s, tok+1, settledFor)
	// Requests the sampler sent while the leader was frozen were answered
	// after it woke: each must disown the term.
	woke := 0
	for _, a := range c.window(at, time.Now()) {
		if a.Who == m.i && a.At.After(cont) && a.Sent.Before(cont) {
			woke++
			if a.State.Leader {
				t.Fatalf("%s answered leader:true (token %v) on waking from a %v pause",
					m.pod, sidecartest.Deref(a.State.Token), cont.Sub(at).Round(time.Millisecond))
			}
		}
	}
	return faultResult{fault: "pause", before: c.label(old, tok), after: c.label(s, tok+1), demoted: -1, recovered: took,
		note: fmt.Sprintf("paused %v; %d answers on waking, all leader:false", cont.Sub(at).Round(time.Millisecond), woke)}, s, tok + 1
}

func (c *chaos) partition(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	t := c.t
	t.Helper()
	m := c.member(old)
	at := time.Now()
	m.px.cut()
	s, took := c.expectNext(old, tok+1, at)
	if d := sidecartest.RenewDeadline + 500*time.Millisecond - time.Since(at); d > 0 {
		time.Sleep(d)
	}
	healed := time.Now()
	m.px.heal()
	sidecartest.Steady(t, c.live(), s, tok+1, settledFor)
	demoted := lastClaimBy(c.window(at, time.Now()), m.i, tok, at).Sub(at)
	if demoted > demoteBound {
		t.Fatalf("%s, cut off from the API server, claimed token %d %v after the cut (bound %v)", m.pod, tok, demoted, demoteBound)
	}
	return faultResult{fault: "partition", before: c.label(old, tok), after: c.label(s, tok+1), demoted: max(demoted, 0), recovered: took,
		note: fmt.Sprintf("cut %v, %d connections held", healed.Sub(at).Round(time.Millisecond), m.px.heldCount.Load())}, s, tok + 1
}

// deleteLease deletes the Lease under the live leader. The leader, still
// inside its claim, recreates it with t+1 at its next renewal (a retry
// period on) and claims throughout; a standby, having seen a holder, waits
// a lease duration from the deletion before it may create the record.
func (c *chaos) deleteLease(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	t := c.t
	t.Helper()
	m := c.member(old)
	at := time.Now()
	if err := c.k.Client.CoordinationV1().Leases(c.ns).Delete(context.Background(), c.name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the Lease: %v", err)
	}
	s := sidecartest.AwaitToken(t, c.live(), tok+1, sidecartest.RetryPeriod+time.Second)
	took := time.Since(at)
	if s != old {
		t.Fatalf("%s recreated the Lease %v after the deletion; the leader, still claiming, should have", c.member(s).pod, took)
	}
	sidecartest.Steady(t, c.live(), s, tok+1, settledFor)
	answers := c.window(at, time.Now())
	demoted := lastClaimBy(answers, m.i, tok, at).Sub(at)
	gaps := 0
	for _, a := range answers {
		if a.Who == m.i && !a.State.Leader && a.Sent.Before(at.Add(took)) {
			gaps++
		}
	}
	if gaps > 0 {
		t.Fatalf("%s answered leader:false %d times between the deletion and recreating the Lease", m.pod, gaps)
	}
	return faultResult{fault: "delete", before: c.label(old, tok), after: c.label(s, tok+1), demoted: max(demoted, 0), recovered: took,
		note: fmt.Sprintf("recreated by the old leader; token %d last claimed %v after the deletion; no leader:false answer between",
			tok, demoted.Round(time.Millisecond))}, s, tok + 1
}

// awaitAgain waits, from up (the store is back), for one leader: the old
// holder with its token or another with the next, then for it to stay.
//
// A leader counts once its claim is fresh: valid for more than a retry
// period still. A renewal that began while the store was unavailable and
// went through only once it was back (SQLite: blocked on the write lock)
// makes the sidecar lead for what is left of a window that began before:
// it answers leader:true for a few milliseconds, then leader:false until
// its next renewal. That is the self-demotion rule at work, not a second
// leader (the recorder checks overlaps); the first such claim is reported
// as firstSeen.
func (c *chaos) awaitAgain(old *sidecartest.Sidecar, tok int64, up time.Time) (s *sidecartest.Sidecar, next int64, took, firstSeen time.Duration) {
	t := c.t
	t.Helper()
	firstSeen = -1
	deadline := up.Add(recoveryBound)
	for s == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no leader %v after the store was back", recoveryBound)
		}
		if ls, sts := sidecartest.Leaders(t, c.live()); len(ls) == 1 {
			if firstSeen < 0 {
				firstSeen = time.Since(up)
			}
			if sts[0].ValidUntil != nil && time.Until(*sts[0].ValidUntil) > sidecartest.RetryPeriod {
				s, next = ls[0], *sts[0].Token
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	took = time.Since(up)
	if (s == old && next != tok) || (s != old && next != tok+1) {
		t.Fatalf("after the outage: same holder %v with token %d, previous token %d", s == old, next, tok)
	}
	sidecartest.Steady(t, c.live(), s, next, settledFor)
	return s, next, took, firstSeen
}

// noLeaderWhileDown fails t if anyone but old (with tok, within
// demoteBound of at) leads now.
func (c *chaos) noLeaderWhileDown(old *sidecartest.Sidecar, tok int64, at time.Time) {
	c.t.Helper()
	if ls, sts := sidecartest.Leaders(c.t, c.live()); len(ls) > 0 && (ls[0] != old || *sts[0].Token != tok || time.Since(at) > demoteBound) {
		c.t.Fatalf("%s leads with token %d %v after the store went away", c.member(ls[0]).pod, *sts[0].Token, time.Since(at))
	}
}

// storeLock holds SQLite's write lock from another process for a lease
// duration and a second: the leader cannot renew and demotes itself,
// nobody can be elected; after the lock is released one leader again.
func (c *chaos) storeLock(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	t := c.t
	t.Helper()
	at := time.Now()
	unlock := sidecartest.HoldWriteLock(t, c.db)
	held := true
	t.Cleanup(func() {
		if held {
			unlock()
		}
	})
	for time.Since(at) < sidecartest.LeaseDuration+time.Second {
		c.noLeaderWhileDown(old, tok, at)
		time.Sleep(10 * time.Millisecond)
	}
	unlockAt := time.Now()
	unlock()
	held = false
	s, next, took, first := c.awaitAgain(old, tok, unlockAt)
	demoted := lastClaimBy(c.window(at, unlockAt), c.member(old).i, tok, at).Sub(at)
	if demoted > demoteBound {
		t.Fatalf("token %d still claimed %v after the write lock was taken (bound %v)", tok, demoted, demoteBound)
	}
	return faultResult{fault: "storelock", before: c.label(old, tok), after: c.label(s, next), demoted: max(demoted, 0), recovered: took,
		note: fmt.Sprintf("write lock held %v; first claim after %v", unlockAt.Sub(at).Round(time.Millisecond), first.Round(time.Millisecond))}, s, next
}

func (c *chaos) apiserver(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	t := c.t
	t.Helper()
	api := c.k.Env.ControlPlane.APIServer
	stopped := make(chan error, 1)
	down := true
	t.Cleanup(func() { // the API server is shared: start it again, whatever happens
		if down {
			<-stopped
			if err := api.Start(); err != nil {
				t.Errorf("restarting kube-apiserver: %v", err)
			}
		}
	})
	at := time.Now()
	var stopTook time.Duration
	go func() {
		err := api.Stop()
		stopTook = time.Since(at)
		stopped <- err
	}()
	var stopErr error
	func() {
		deadline := time.After(30 * time.Second)
		for {
			select {
			case stopErr = <-stopped:
				stopped <- stopErr // for the cleanup
				return
			case <-deadline:
				t.Fatal("kube-apiserver still stopping after 30s")
			case <-time.After(10 * time.Millisecond):
			}
			// Nobody may lead for long with the store gone: the old leader
			// demotes itself (demoteBound) and nobody can be elected.
			c.noLeaderWhileDown(old, tok, at)
		}
	}()
	if stopErr != nil {
		t.Fatalf("stopping kube-apiserver: %v", stopErr)
	}
	startAt := time.Now()
	if err := api.Start(); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
	down = false
	up := time.Now()
	// Every candidate tries again within 1.2 retry periods of the API
	// server answering: the holder renews its own record (same token), or a
	// standby that saw the record unchanged since before the outage takes
	// it over (t+1); a standby that saw it change after the restart waits a
	// lease duration: recoveryBound from Start returning.
	s, next, took, first := c.awaitAgain(old, tok, up)
	// Until Start was called no renewal could succeed: claims of the old
	// term sent before then are the ones the leader made without a store.
	demoted := lastClaimBy(c.window(at, startAt), c.member(old).i, tok, at).Sub(at)
	if demoted > demoteBound {
		t.Fatalf("token %d still claimed %v after kube-apiserver began stopping (bound %v)", tok, demoted, demoteBound)
	}
	return faultResult{fault: "apiserver", before: c.label(old, tok), after: c.label(s, next), demoted: max(demoted, 0), recovered: took,
		note: fmt.Sprintf("stop took %v, start %v; down %v in all; first claim after %v", stopTook.Round(time.Millisecond),
			up.Sub(startAt).Round(time.Millisecond), up.Sub(at).Round(time.Millisecond), first.Round(time.Millisecond))}, s, next
}
