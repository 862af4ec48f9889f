package election

import (
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

func TestHandoffStepRules(t *testing.T) {
	offer := func(from, to string, token int64) backend.Record {
		return backend.Record{HolderIdentity: from, LeaseDurationSeconds: 15, Transitions: token,
			Handoff: backend.Handoff{Phase: backend.HandoffOffer, From: from, To: to, Token: token}}
	}
	base := func(rec backend.Record) observation {
		return observation{identity: "web-2_b", highest: rec.Transitions, ownLease: 15 * time.Second,
			view: view{known: true, present: true, sawRecord: true, rec: rec, version: "7", since: epoch}}
	}
	cases := []struct {
		name string
		o    func() observation
		now  time.Duration
		want actionKind // wait: no hand-off step
	}{
		{"an offer to anyone", func() observation { return base(offer("a", "", 3)) }, 0, accept},
		{"an offer to its identity", func() observation { return base(offer("a", "web-2_b", 3)) }, 0, accept},
		{"an offer to its Pod name", func() observation { return base(offer("a", "web-2", 3)) }, 0, accept},
		{"an offer to another Pod", func() observation { return base(offer("a", "web-1", 3)) }, 0, wait},
		{"its own offer", func() observation { return base(offer("web-2_b", "", 3)) }, 0, wait},
		{"an offer a lease old", func() observation { return base(offer("a", "", 3)) }, 15 * time.Second, wait},
		{"an offer below a token seen", func() observation { o := base(offer("a", "", 3)); o.highest = 4; return o }, 0, wait},
		{"an offer at the last token", func() observation { return base(offer("a", "", backend.MaxTransitions)) }, 0, wait},
		{"an offer from a holder that is not its maker", func() observation {
			rec := offer("a", "", 3)
			rec.HolderIdentity = "x"
			return base(rec)
		}, 0, wait},
		{"while stopping", func() observation { o := base(offer("a", "", 3)); o.stopped = true; return o }, 0, wait},
		{"while sitting out (an unhealthy app)", func() observation { o := base(offer("a", "", 3)); o.sittingOut = true; return o }, 0, wait},
		{"while held off", func() observation {
			o := base(offer("a", "", 3))
			o.holdOffUntil = epoch.Add(time.Second)
			return o
		}, 0, wait},
		{"while it still counts itself leader", func() observation { o := base(offer("a", "", 3)); o.leading = true; return o }, 0, wait},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, ok := c.o().handoffStep(epoch.Add(c.now))
			if got := map[bool]actionKind{true: a.kind, false: wait}[ok]; got != c.want {
				t.Fatalf("handoffStep: %v (ok %v), want %v", a.kind, ok, c.want)
			}
		})
	}
}
