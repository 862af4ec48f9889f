package apiserver

import (
	"fmt"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// stall makes the leader's open connections to the API server silently
// dead for longer than a lease duration (its proxy drops their bytes and
// closes nothing; new connections work), as a dropped NAT or conntrack
// entry would. Over HTTP/2 every request shares that one connection. The
// leader's renewal on it times out, the client closes its connections,
// and the retry, within the claim, renews over a new one: the leader
// keeps its term and never answers leader:false, and no standby leads.
func (c *chaos) stall(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	m := c.member(old)
	stalled, redialled := c.stallConnections(m, old, tok, sidecartest.LeaseDuration+500*time.Millisecond)
	return faultResult{fault: "stall", before: c.label(old, tok), after: c.label(old, tok), demoted: -1,
		note: fmt.Sprintf("the leader's %d connections dead for %v, %d dialled since; no leader:false answer",
			stalled, sidecartest.LeaseDuration+500*time.Millisecond, redialled)}, old, tok
}

// stallStandby makes a standby's connections silently dead for longer
// than a lease duration and a renew deadline. Its watch hears nothing, so
// it takes the leader's Lease for expired and reads it to take it over;
// the read times out, the client dials anew, and it reads the renewed
// Lease and stays a standby: the leader keeps its term throughout.
func (c *chaos) stallStandby(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	var m *chaosMember
	for _, s := range c.live() {
		if s != old {
			m = c.member(s)
			break
		}
	}
	d := sidecartest.LeaseDuration + sidecartest.RenewDeadline + time.Second
	stalled, redialled := c.stallConnections(m, old, tok, d)
	return faultResult{fault: "stallsb", before: c.label(old, tok), after: c.label(old, tok), demoted: -1,
		note: fmt.Sprintf("standby %s's %d connections dead for %v, %d dialled since; no leader:false answer",
			m.pod, stalled, d, redialled)}, old, tok
}

// stallConnections stalls m's connections for d, failing the run if
// anyone but leader with tok leads meanwhile, if m dialled no new
// connection before d was up (the client never gave the dead one up), or
// if leader answered leader:false from the stall until it has been steady
// for settledFor after.
func (c *chaos) stallConnections(m *chaosMember, leader *sidecartest.Sidecar, tok int64, d time.Duration) (stalled, redialled int64) {
	t := c.t
	t.Helper()
	dialled := m.px.forwarded.Load()
	at := time.Now()
	m.px.stall()
	for time.Since(at) < d {
		if ls, sts := sidecartest.Leaders(t, c.live()); len(ls) > 0 && (ls[0] != leader || *sts[0].Token != tok) {
			t.Fatalf("%s leads with token %d %v after %s's connections went dead",
				c.member(ls[0]).pod, *sts[0].Token, time.Since(at).Round(time.Millisecond), m.pod)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stalled, redialled = m.px.stalledCount.Load(), m.px.forwarded.Load()-dialled
	m.px.unstall()
	if stalled == 0 || redialled == 0 {
		t.Fatalf("%s: %d connections stalled, %d dialled in %v: the client kept waiting on the dead ones", m.pod, stalled, redialled, d)
	}
	sidecartest.Steady(t, c.live(), leader, tok, settledFor)
	gaps, who := 0, c.member(leader).i
	for _, a := range c.window(at, time.Now()) {
		if a.Who == who && !a.State.Leader {
			gaps++
		}
	}
	if gaps > 0 {
		t.Fatalf("the leader answered leader:false %d times after %s's connections went dead", gaps, m.pod)
	}
	return stalled, redialled
}
