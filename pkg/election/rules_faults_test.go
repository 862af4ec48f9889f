package election

import (
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

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
