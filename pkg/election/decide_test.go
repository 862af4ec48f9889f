package election

import (
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// One row per rule of the package doc, in its order. Times are offsets
// from epoch; the candidate is "me" with a 15s lease of its own.
func TestDecide(t *testing.T) {
	at := func(d time.Duration) time.Time { return epoch.Add(d) }
	held := func(holder string, seconds int32, token int64) view {
		return view{known: true, present: true, sawRecord: true, version: "v", since: epoch,
			rec: backend.Record{HolderIdentity: holder, LeaseDurationSeconds: seconds, Transitions: token}}
	}
	released := func(token int64) view {
		v := held("", 1, token)
		v.rec.AcquireTime, v.rec.RenewTime = epoch, epoch
		return v
	}
	emptied := held("", 15, 3)
	emptied.rec.AcquireTime, emptied.rec.RenewTime = epoch.Add(-time.Minute), epoch
	gone := view{known: true, sawRecord: true, since: epoch, rec: backend.Record{HolderIdentity: "x", LeaseDurationSeconds: 15}}
	neverSeen := view{known: true, since: epoch}
	neverCreated := view{known: true, neverCreated: true, since: epoch}
	standby := func(v view, highest int64) observation {
		return observation{identity: "me", view: v, highest: highest, ownLease: 15 * time.Second}
	}
	leader := func(v view, token int64, claiming bool) observation {
		o := standby(v, max(token, v.rec.Transitions))
		o.leading, o.claiming, o.token = true, claiming, token
		return o
	}
	cases := []struct {
		name string
		o    observation
		now  time.Duration
		want action
	}{
		// Token.
		{"a renewal keeps the token", leader(held("me", 15, 4), 4, true), 0, action{kind: renew, token: 4}},
		{"a takeover is one above the highest token seen", standby(held("x", 15, 4), 9), 15 * time.Second, action{kind: acquire, token: 10}},
		{"a token raised by hand on our record starts a term above it", leader(held("me", 15, 8), 4, true), 0, action{kind: acquire, token: 9}},
		{"a token lowered by hand on our record starts a term above the highest", leader(held("me", 15, 1), 4, true), 0, action{kind: acquire, token: 5}},
		{"no token is left past the maximum", standby(released(backend.MaxTransitions), backend.MaxTransitions), 0, action{kind: wait, exhausted: true}},
		// Expiry.
		{"a live holder is waited out", standby(held("x", 15, 1), 1), 15*time.Second - 1, action{kind: wait, until: at(15 * time.Second)}},
		{"a holder unchanged for its lease is taken over", standby(held("x", 15, 1), 1), 15 * time.Second, action{kind: acquire, token: 2}},
		{"a longer record lease is honoured", standby(held("x", 30, 1), 1), 20 * time.Second, action{kind: wait, until: at(30 * time.Second)}},
		{"a shorter record lease waits our own", standby(held("x", 1, 1), 1), 5 * time.Second, action{kind: wait, until: at(15 * time.Second)}},
		{"a record without a lease waits our own", standby(held("x", 0, 1), 1), 5 * time.Second, action{kind: wait, until: at(15 * time.Second)}},
		{"a leader that finds another holder steps down", leader(held("x", 15, 2), 1, true), 0,
			action{kind: wait, until: at(15 * time.Second), stepDown: "another candidate holds the record"}},
		// Releases.
		{"a release is taken at once", standby(released(3), 3), 0, action{kind: acquire, token: 4}},
		{"an emptied record is waited out", standby(emptied, 3), 14 * time.Second, action{kind: wait, until: at(15 * time.Second)}},
		{"an emptied record is taken at its expiry", standby(emptied, 3), 15 * time.Second, action{kind: acquire, token: 4}},
		{"the holder takes back an emptied record at once", leader(emptied, 3, true), 0, action{kind: acquire, token: 4}},
		{"a leader past its deadline does not take back an emptied record", leader(emptied, 3, false), 0,
			action{kind: wait, until: at(15 * time.Second), stepDown: "the record was emptied"}},
		// A missing record.
		{"never created: created and claimed at once", standby(neverCreated, 0), 0, action{kind: recreate, token: 1, firstStart: true}},
		{"never seen, maybe deleted: created, to be claimed later", standby(neverSeen, 0), 0, action{kind: recreate, token: 1, deferClaim: true}},
		{"seen, then missing: waited out", standby(gone, 7), 14 * time.Second, action{kind: wait, until: at(15 * time.Second)}},
		{"seen, then missing: recreated above the highest at expiry, to be claimed later", standby(gone, 7), 15 * time.Second,
			action{kind: recreate, token: 8, deferClaim: true}},
		{"a record recreated unclaimed is waited out like another's", func() observation {
			o := standby(held("me", 15, 8), 8)
			o.deferred, o.written = "v", "v"
			return o
		}(), 15*time.Second - 1, action{kind: wait, until: at(15 * time.Second)}},
		{"a record recreated unclaimed is claimed at its expiry", func() observation {
			o := standby(held("me", 15, 8), 8)
			o.deferred, o.written = "v", "v"
			return o
		}(), 15 * time.Second, action{kind: renew, token: 8}},
		{"the holder recreates at once while it claims", leader(gone, 7, true), 0, action{kind: recreate, token: 8}},
		{"a leader past its deadline waits like a standby", leader(gone, 7, false), 0,
			action{kind: wait, until: at(15 * time.Second), stepDown: "the record disappeared"}},
		{"a record naming us that we do not know we wrote is waited out", standby(held("me", 15, 8), 8), 14 * time.Second,
			action{kind: wait, until: at(15 * time.Second)}},
		{"a record naming us that we do not know we wrote is taken as a new term at its expiry", standby(held("me", 15, 8), 8),
			15 * time.Second, action{kind: acquire, token: 9}},
		{"a paused leader renews the record it wrote if nobody wrote since", func() observation {
			o := leader(held("me", 15, 4), 4, false)
			o.written = "v"
			return o
		}(), 0, action{kind: renew, token: 4}},
		// Hold-off and stop.
		{"a released candidate holds off", func() observation {
			o := standby(released(3), 3)
			o.holdOffUntil = at(10 * time.Second)
			return o
		}(), 0, action{kind: wait, until: at(10 * time.Second)}},
		{"a candidate sitting out takes nothing, not even a release", func() observation {
			o := standby(released(3), 3)
			o.sittingOut = true
			return o
		}(), time.Hour, action{kind: wait}},
		{"a leader sitting out steps down", func() observation {
			o := leader(held("me", 15, 4), 4, true)
			o.sittingOut = true
			return o
		}(), 0, action{kind: wait, stepDown: "sitting out"}},
		{"a stopped candidate does nothing", func() observation {
			o := standby(released(3), 3)
			o.stopped = true
			return o
		}(), 0, action{kind: wait}},
		{"nothing is known before the first answer", standby(view{}, 0), 0, action{kind: wait}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := decide(c.o, at(c.now)); got != c.want {
				t.Fatalf("decide at +%v = %+v, want %+v", c.now, got, c.want)
			}
		})
	}
}
