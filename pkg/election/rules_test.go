package election

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// One row per rule of the package doc, in its order. Times are offsets
// from epoch; the candidate is "me" with a 15s lease of its own, trusting
// a record's up to 150s (ten times it, the default).
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
		return observation{identity: "me", view: v, highest: highest, ownLease: 15 * time.Second, maxRecordLease: 150 * time.Second}
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
		{"a record lease beyond the bound waits the bound", standby(held("x", math.MaxInt32, 1), 1), 20 * time.Second, action{kind: wait, until: at(150 * time.Second)}},
		{"a record lease beyond the bound is taken over at the bound", standby(held("x", math.MaxInt32, 1), 1), 150 * time.Second, action{kind: acquire, token: 2}},
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

func TestHandoffStepRules(t *testing.T) {
	offer := func(from, to string, token int64) backend.Record {
		return backend.Record{HolderIdentity: from, LeaseDurationSeconds: 15, Transitions: token,
			Handoff: backend.Handoff{Phase: backend.HandoffOffer, From: from, To: to, Token: token}}
	}
	base := func(rec backend.Record) observation {
		return observation{identity: "web-2_b", highest: rec.Transitions, ownLease: 15 * time.Second, maxRecordLease: 150 * time.Second,
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

		// A rollout: an offer to anyone from a leader of its own revision
		// stands for sameRevisionWait, so one of another revision takes it.
		{"an offer to anyone from its own revision", func() observation { return ofRevision(base(offer("a", "", 3)), "old", "old") }, 0, wait},
		{"the same, just before the wait ends", func() observation { return ofRevision(base(offer("a", "", 3)), "old", "old") }, 249 * time.Millisecond, wait},
		{"the same, once the wait is over", func() observation { return ofRevision(base(offer("a", "", 3)), "old", "old") }, 250 * time.Millisecond, accept},
		{"an offer to anyone from another revision", func() observation { return ofRevision(base(offer("a", "", 3)), "old", "new") }, 0, accept},
		{"an offer to its Pod name from its own revision", func() observation { return ofRevision(base(offer("a", "web-2", 3)), "old", "old") }, 0, accept},
		{"an offer of no revision", func() observation { return ofRevision(base(offer("a", "", 3)), "", "old") }, 0, accept},
		{"an offer while it knows no revision of its own", func() observation { return ofRevision(base(offer("a", "", 3)), "old", "") }, 0, accept},
		{"an offer from another revision while stopping", func() observation {
			o := ofRevision(base(offer("a", "", 3)), "old", "new")
			o.stopped = true
			return o
		}, 0, wait},
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

// ofRevision makes o's offer come from a leader of revision from, to a
// candidate of revision own that lets such an offer stand 250ms.
func ofRevision(o observation, from, own string) observation {
	o.view.rec.Handoff.Revision = from
	o.revision, o.sameRevisionWait = own, 250*time.Millisecond
	return o
}

// The defaults: lease 15s, renew deadline 10s, retry 2s.
func TestRules(t *testing.T) {
	justUnder := time.Nanosecond
	cases := []struct {
		name  string
		steps []step
	}{
		{"acquire an empty election", []step{
			try("a", true), leads("a", 1), storedAs("a", 1), validFor("a", 10*time.Second),
		}},
		{"lose to a live holder", []step{
			try("a", true), try("b", false), follows("b", "a"), leads("a", 1),
		}},
		{"renew keeps the token and moves validUntil", []step{
			try("a", true), advance(2 * time.Second), try("a", true),
			leads("a", 1), storedAs("a", 1), validFor("a", 10*time.Second),
		}},
		{"takeover after the record sat unchanged for its lease duration bumps the token by one", []step{
			try("a", true), try("b", false),
			advance(15*time.Second - justUnder), try("b", false), follows("b", "a"),
			advance(justUnder), try("b", true), leads("b", 2), storedAs("b", 2),
		}},
		{"a holder that keeps renewing is never taken over", []step{
			try("a", true), try("b", false),
			repeat(20, advance(2*time.Second), try("a", true), try("b", false)),
			leads("a", 1), follows("b", "a"),
		}},
		{"expiry is measured from observation, not from the record's renew time", []step{
			handEdit(backend.Record{HolderIdentity: "x", LeaseDurationSeconds: 15,
				RenewTime: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), Transitions: 4}),
			try("b", false), advance(14 * time.Second), try("b", false),
			advance(time.Second), try("b", true), leads("b", 5),
		}},
		{"a holder that cannot renew stops claiming at renewDeadline with its loop stuck", []step{
			try("a", true), advance(10*time.Second - justUnder), leads("a", 1),
			advance(justUnder), follows("a", "a"),
		}},
		{"a failing store keeps the claim only until renewDeadline", []step{
			try("a", true), advance(2 * time.Second), storeFails(errors.New("connection refused")),
			try("a", false), leads("a", 1), advance(8 * time.Second), follows("a", "a"),
			storeFails(nil), try("a", true), leads("a", 1),
		}},
		{"a paused leader wakes demoted and finds its successor", []step{
			try("a", true), try("b", false), advance(20 * time.Second),
			follows("a", "a"), try("b", true), leads("b", 2),
			try("a", false), follows("a", "b"), storedAs("b", 2),
		}},
		{"release empties the holder, keeps the token, and a standby takes it at once", []step{
			try("a", true), try("b", false), release("a"),
			storedAs("", 1), follows("a", ""), try("b", true), leads("b", 2),
		}},
		{"a released candidate holds off for the lease duration", []step{
			try("a", true), release("a"), advance(15*time.Second - justUnder), try("a", false),
			advance(justUnder), try("a", true), leads("a", 2),
		}},
		{"a missing record is recreated above the highest token seen, once its holder's claim is over", []step{
			handEdit(backend.Record{HolderIdentity: "x", LeaseDurationSeconds: 15, Transitions: 7}),
			try("a", false), deleteRecord(), try("a", false), advance(15 * time.Second),
			try("a", false), storedAs("a", 8), advance(15 * time.Second),
			try("a", true), leads("a", 8), storedAs("a", 8),
		}},
		{"a leader whose record is deleted starts a new term", []step{
			try("a", true), deleteRecord(), try("a", true), leads("a", 2), storedAs("a", 2),
		}},
		{"a record without a lease duration lasts our lease duration", []step{
			handEdit(backend.Record{HolderIdentity: "x", Transitions: 3}),
			try("b", false), advance(15*time.Second - justUnder), try("b", false),
			advance(justUnder), try("b", true), leads("b", 4),
		}},
		{"a token edited below one seen starts a new term rather than go backwards", []step{
			try("a", true), advance(time.Second),
			handEdit(backend.Record{HolderIdentity: "a", LeaseDurationSeconds: 15}),
			try("a", true), leads("a", 2), storedAs("a", 2),
		}},
		{"a record lease beyond the bound is waited out only up to the bound, and reported", []step{
			handEdit(backend.Record{HolderIdentity: "x", LeaseDurationSeconds: math.MaxInt32, Transitions: 3}),
			try("b", false), advance(150*time.Second - justUnder), try("b", false), follows("b", "x"),
			advance(justUnder), try("b", true), leads("b", 4),
			observedTimes("b", "lease-duration-bounded holder=x declared=596523h14m7s bound=2m30s", 1),
		}},
		{"a record lease up to the bound is honoured, and not reported", []step{
			handEdit(backend.Record{HolderIdentity: "x", LeaseDurationSeconds: 150, Transitions: 3}),
			try("b", false), advance(150*time.Second - justUnder), try("b", false),
			advance(justUnder), try("b", true), leads("b", 4),
			observedTimes("b", "lease-duration-bounded holder=x declared=2m30s bound=2m30s", 0),
		}},
		{"a changed record restarts the expiry wait", []step{
			try("a", true), try("b", false), advance(14 * time.Second), try("a", true),
			try("b", false), advance(14 * time.Second), try("b", false), follows("b", "a"),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			for _, s := range c.steps {
				s(h)
			}
		})
	}
}

// Faults from outside the election: records deleted or edited by hand,
// slow reads, tokens that went back. The defaults: lease 15s, renew
// deadline 10s, retry 2s. In every case no two candidates lead at once.
func TestRulesUnderFaults(t *testing.T) {
	justUnder := time.Nanosecond
	emptiedByHand := backend.Record{LeaseDurationSeconds: 15, AcquireTime: epoch, RenewTime: epoch, Transitions: 1}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a standby that saw a holder waits out its claim after the record disappears, then recreates it and claims a lease later", []step{
			try("a", true), try("b", false), advance(time.Second), deleteRecord(),
			try("b", false), follows("b", ""), leads("a", 1),
			advance(15*time.Second - justUnder), try("b", false),
			advance(justUnder), try("b", false), storedAs("b", 2), follows("b", "b"),
			advance(15*time.Second - justUnder), try("b", false), follows("b", "b"),
			advance(justUnder), try("b", true), leads("b", 2), storedAs("b", 2),
		}},
		{"a record created and deleted while a standby was not looking is not claimed at once", []step{
			try("a", true), try("b", false), deleteRecord(), try("b", false),
			advance(time.Second), try("a", true), leads("a", 2), // b does not see this
			advance(13 * time.Second), try("a", true),
			advance(500 * time.Millisecond), deleteRecord(), advance(500 * time.Millisecond),
			// b's view: missing since +0s, so it recreates the record at
			// +15s, while a claims until +24s. b never saw token 2, so it
			// writes 2 again: the guards refuse an equal token from another
			// holder.
			try("b", false), storedAs("b", 2), follows("b", "b"), leads("a", 2),
			advance(15*time.Second - justUnder), try("b", false), follows("b", "b"),
			advance(justUnder), try("b", true), leads("b", 2),
		}},
		{"the holder recreates a deleted record at once while it claims", []step{
			try("a", true), try("b", false), deleteRecord(), try("a", true), leads("a", 2),
			try("b", false), follows("b", "a"),
		}},
		{"a leader past its deadline waits like any standby when its record is gone", []step{
			try("a", true), advance(10 * time.Second), deleteRecord(), try("a", false), follows("a", ""),
			advance(15*time.Second - justUnder), try("a", false),
			advance(justUnder), try("a", false), storedAs("a", 2),
			advance(15 * time.Second), try("a", true), leads("a", 2),
		}},
		{"a candidate on a store that never held a record creates it and leads at once", []step{
			try("a", true), leads("a", 1),
		}},
		{"a candidate that never saw a deleted record creates it, and claims it a lease later", []step{
			// b still claims the deleted record: a's new record ends b's
			// claim at b's next attempt, and a claims only after a lease.
			try("b", true), deleteRecord(), try("a", false), storedAs("a", 1), leads("b", 1),
			try("b", false), follows("b", "a"), follows("a", "a"),
			advance(15*time.Second - justUnder), try("a", false), follows("a", "a"),
			advance(justUnder), try("a", true), leads("a", 1),
		}},
		{"a record of ours that we do not know we wrote is waited out like another's", []step{
			// a's first Create lands after it gave up on it; meanwhile the
			// record was deleted under b, which still claims.
			try("b", true), deleteRecord(), nextCreateLandsButFails("a"), try("a", false), leads("b", 1),
			storedAs("a", 1), try("a", false), follows("a", "a"), leads("b", 1),
			advance(15*time.Second - justUnder), try("a", false),
			advance(justUnder), try("a", true), leads("a", 2),
		}},
		{"a first start whose create is answered after its claim lapsed claims it a lease later", []step{
			// a's first read says nothing exists; its create is answered
			// 11s later, after its claim (10s from the attempt's start).
			duringNextCreate("a", advance(11*time.Second)), try("a", false), storedAs("a", 1), follows("a", "a"),
			advance(15*time.Second - justUnder), try("a", false),
			advance(justUnder), try("a", true), leads("a", 1),
		}},
		{"a holder emptied by hand is waited out like an expiry", []step{
			try("a", true), try("b", false), handEdit(emptiedByHand),
			try("b", false), leads("a", 1),
			advance(15*time.Second - justUnder), try("b", false),
			advance(justUnder), try("b", true), leads("b", 2),
		}},
		{"the holder takes back a record emptied by hand at once, with a new token", []step{
			try("a", true), try("b", false), handEdit(emptiedByHand),
			try("a", true), leads("a", 2), try("b", false), follows("b", "a"),
		}},
		{"a lease duration shortened by hand does not shorten the wait", []step{
			try("a", true), try("b", false),
			handEdit(backend.Record{HolderIdentity: "a", LeaseDurationSeconds: 1, Transitions: 1}),
			advance(2 * time.Second), try("b", false), leads("a", 1),
			// b saw the edit at +2s and waits its own 15s, to +17s.
			advance(15*time.Second - justUnder), try("b", false),
			advance(justUnder), try("b", true), leads("b", 2),
		}},
		{"expiry counts from when a read answered, not from when it was sent", []step{
			try("a", true),
			duringNextGet("b", advance(6*time.Second), try("a", true)),
			try("b", false),
			// a renewed at +6s and claims until +16s; b saw that renewal
			// no earlier than +6s, so it waits until +21s.
			advance(10*time.Second - justUnder), leads("a", 1),
			advance(justUnder), follows("a", "a"),
			advance(5*time.Second - justUnder), try("b", false),
			advance(justUnder), try("b", true), leads("b", 2),
		}},
		{"a token raised by hand on the leader's record starts a term above it", []step{
			try("a", true),
			handEdit(backend.Record{HolderIdentity: "a", LeaseDurationSeconds: 15, Transitions: 5}),
			try("a", true), leads("a", 6), storedAs("a", 6),
		}},
		{"a token below one seen is reported and never reused", []step{
			try("a", true), release("a"), try("b", true), leads("b", 2),
			handEdit(backend.Record{LeaseDurationSeconds: 1, Transitions: 0}),
			try("b", true), leads("b", 3), observed("b", "token-regressed seen=0 highest=2"),
		}},
		{"a lower token is reported once, not at every renewal of its holder", []step{
			try("a", true), release("a"), try("b", true), leads("b", 2), try("a", false),
			handEdit(backend.Record{HolderIdentity: "x", LeaseDurationSeconds: 15, Transitions: 1}),
			try("a", false), follows("a", "x"),
			handEdit(backend.Record{HolderIdentity: "x", LeaseDurationSeconds: 15, Transitions: 1, RenewTime: epoch.Add(time.Second)}),
			try("a", false),
			handEdit(backend.Record{HolderIdentity: "x", LeaseDurationSeconds: 15, Transitions: 1, RenewTime: epoch.Add(2 * time.Second)}),
			try("a", false), observedTimes("a", "token-regressed seen=1 highest=2", 1),
			handEdit(backend.Record{HolderIdentity: "y", LeaseDurationSeconds: 15, Transitions: 1}),
			try("a", false), observedTimes("a", "token-regressed seen=1 highest=2", 2),
		}},
		{"the highest token cannot be exceeded: reported, never wrapped", []step{
			handEdit(backend.Record{LeaseDurationSeconds: 1, Transitions: backend.MaxTransitions}),
			try("a", false), follows("a", ""), storedAs("", backend.MaxTransitions),
			observed("a", "token-exhausted seen=2147483647 highest=2147483647"),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			for _, s := range c.steps {
				s(h)
			}
		})
	}
}

func TestNewIdentityIsUniquePerCall(t *testing.T) {
	a, b := NewIdentity("pod-0"), NewIdentity("pod-0")
	if a == b || !strings.HasPrefix(a, "pod-0_") {
		t.Fatalf("identities %q and %q: want distinct, prefixed by pod-0_", a, b)
	}
}

func TestIdentityPrefixUndoesNewIdentity(t *testing.T) {
	for _, prefix := range []string{"web-7d9f4-x2x7k", "my_app", "host.example.com", ""} {
		if got := IdentityPrefix(NewIdentity(prefix)); got != prefix {
			t.Errorf("IdentityPrefix(NewIdentity(%q)) = %q", prefix, got)
		}
	}
	for identity, want := range map[string]string{
		"":                 "",
		"web-0":            "web-0",
		"web-0_":           "web-0",
		"_9":               "",
		"a_b_c":            "a_b",
		"node-1_client-go": "node-1",
	} {
		if got := IdentityPrefix(identity); got != want {
			t.Errorf("IdentityPrefix(%q) = %q, want %q", identity, got, want)
		}
	}
}
