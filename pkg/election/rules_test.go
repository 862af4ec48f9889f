package election

import (
	"errors"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

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
