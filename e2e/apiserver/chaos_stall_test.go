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
	t := c.t
	t.Helper()
	m := c.member(old)
	dialled := m.px.forwarded.Load()
	at := time.Now()
	m.px.stall()
	for time.Since(at) < sidecartest.LeaseDuration+500*time.Millisecond {
		if ls, sts := sidecartest.Leaders(t, c.live()); len(ls) > 0 && (ls[0] != old || *sts[0].Token != tok) {
			t.Fatalf("%s leads with token %d %v after the leader's connections went dead",
				c.member(ls[0]).pod, *sts[0].Token, time.Since(at).Round(time.Millisecond))
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.px.unstall()
	stalled, redialled := m.px.stalledCount.Load(), m.px.forwarded.Load()-dialled
	if stalled == 0 || redialled == 0 {
		t.Fatalf("%s: %d connections stalled, %d dialled since: the fault did not happen as meant", m.pod, stalled, redialled)
	}
	sidecartest.Steady(t, c.live(), old, tok, settledFor)
	gaps := 0
	for _, a := range c.window(at, time.Now()) {
		if a.Who == m.i && !a.State.Leader {
			gaps++
		}
	}
	if gaps > 0 {
		t.Fatalf("%s answered leader:false %d times after its connections went dead; it should have renewed over a new one", m.pod, gaps)
	}
	return faultResult{fault: "stall", before: c.label(old, tok), after: c.label(old, tok), demoted: -1, recovered: 0,
		note: fmt.Sprintf("%d connections dead for %v, %d dialled since; no leader:false answer",
			stalled, sidecartest.LeaseDuration+500*time.Millisecond, redialled)}, old, tok
}
