package fencesuite_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi/httpapitest"
)

// leadingAs is this replica's sidecar leading with token, as the process
// with identity (a restarted sidecar has a new one).
func leadingAs(identity string, token int64) election.Status {
	return httpapitest.Leading(identity, token, time.Minute)
}

// isRegression fails unless err reports that token `after` of `afterID`
// was followed by token got of gotID.
func isRegression(t *testing.T, err error, got int64, gotID string, after int64, afterID string) {
	t.Helper()
	msg := fmt.Sprint(err)
	if !errors.Is(err, fence.ErrTokenRegressed) ||
		!strings.Contains(msg, (fence.TermID{Token: got, Holder: gotID}).String()) ||
		!strings.Contains(msg, (fence.TermID{Token: after, Holder: afterID}).String()) {
		t.Fatalf("error %q, want ErrTokenRegressed naming token %d of %s after token %d of %s", msg, got, gotID, after, afterID)
	}
}

// The client never hands out a term that does not follow the highest it has
// delivered; a follower answer in between does not reset that.
func TestStateRefusesARegressedTerm(t *testing.T) {
	cases := []struct {
		name      string
		then      []election.Status // after leading with token 7 as a_1
		refused   bool              // the last answer is refused
		gotToken  int64
		gotHolder string
	}{
		{name: "a renewal", then: []election.Status{leadingAs("a_1", 7)}},
		{name: "a higher token", then: []election.Status{leadingAs("b_2", 8)}},
		{name: "a lower token", then: []election.Status{leadingAs("b_2", 3)}, refused: true, gotToken: 3, gotHolder: "b_2"},
		{name: "the same token, another identity", then: []election.Status{leadingAs("b_2", 7)}, refused: true, gotToken: 7, gotHolder: "b_2"},
		{name: "a lower token after following", then: []election.Status{httpapitest.Following("b_2", "c_3"), leadingAs("b_2", 2)},
			refused: true, gotToken: 2, gotHolder: "b_2"},
		{name: "a higher token after a refused one", then: []election.Status{leadingAs("b_2", 3), leadingAs("b_2", 9)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := newSidecar(t, leadingAs("a_1", 7))
			if s, err := sc.client.State(t.Context()); err != nil || s.TermID() != (fence.TermID{Token: 7, Holder: "a_1"}) {
				t.Fatalf("first State = %+v, %v", s, err)
			}
			var s fence.State
			var err error
			for _, st := range c.then {
				sc.Set(st)
				s, err = sc.client.State(t.Context())
			}
			want := c.then[len(c.then)-1]
			switch {
			case c.refused:
				isRegression(t, err, c.gotToken, c.gotHolder, 7, "a_1")
				if s.Leader || s.Token != 0 || !errors.Is(s.Err, fence.ErrTokenRegressed) || s.Identity != c.gotHolder {
					t.Fatalf("refused State = %+v, want not leader with the error in Err", s)
				}
			case err != nil || s.TermID() != (fence.TermID{Token: want.Token, Holder: want.Identity}):
				t.Fatalf("State = %+v, %v; want leader with token %d", s, err, want.Token)
			}
		})
	}
}

// Watch turns a regressed leader state into a not-leader state that says
// why, once per event, and goes on delivering.
func TestWatchReportsARegressedTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newSidecar(t, leadingAs("a_1", 7))
		states, err := sc.client.Watch(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if s := receive(t, states); !s.Leader || s.Token != 7 {
			t.Fatalf("first state %+v, want leader with token 7", s)
		}
		sc.Set(leadingAs("b_2", 3))
		s := receive(t, states)
		if s.Leader || s.Token != 0 || s.Identity != "b_2" {
			t.Fatalf("state %+v, want a refused term", s)
		}
		isRegression(t, s.Err, 3, "b_2", 7, "a_1")
		nothingPending(t, states)
		sc.Set(leadingAs("b_2", 8))
		if s := receive(t, states); !s.Leader || s.Token != 8 || s.Err != nil {
			t.Fatalf("state %+v, want leader with token 8", s)
		}
	})
}

// WaitForLeadership returns the regression the first time it meets that
// term, so the application can log it; called again, it waits for a term
// that follows, without spinning.
func TestWaitForLeadershipReportsARegressedTermOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newSidecar(t, leadingAs("a_1", 7))
		term := mustLead(t, sc)
		term.Close()

		sc.Set(leadingAs("b_2", 3))
		term, err := sc.client.WaitForLeadership(t.Context())
		if term != nil {
			t.Fatalf("WaitForLeadership handed out %v after token 7", term.ID())
		}
		isRegression(t, err, 3, "b_2", 7, "a_1")

		before := sc.count()
		result := waitTerm(t.Context(), sc.client)
		time.Sleep(time.Hour)
		synctest.Wait()
		if len(result) != 0 {
			t.Fatal("WaitForLeadership returned again for the term it already reported")
		}
		if n := sc.count() - before; n != 1 {
			t.Fatalf("%d requests in an hour of waiting, want the one watch", n)
		}
		sc.Set(leadingAs("c_3", 5)) // another regressed term: reported too
		if _, err := await(t, result, time.Minute); !errors.Is(err, fence.ErrTokenRegressed) {
			t.Fatalf("WaitForLeadership = %v, want ErrTokenRegressed for token 5", err)
		}
		sc.Set(leadingAs("c_3", 8))
		term = mustLead(t, sc)
		if term.ID() != (fence.TermID{Token: 8, Holder: "c_3"}) {
			t.Fatalf("term %v, want token 8 of c_3", term.ID())
		}
	})
}

// A term in progress ends when the sidecar reports a term that does not
// follow it.
func TestTermEndsOnARegressedTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newSidecar(t, leadingAs("a_1", 7))
		term := mustLead(t, sc)
		sc.Set(leadingAs("a_1", 3))
		synctest.Wait()
		select {
		case <-term.Done():
		default:
			t.Fatal("term not over")
		}
		isRegression(t, term.Err(), 3, "a_1", 7, "a_1")
	})
}
