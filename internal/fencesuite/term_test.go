package fencesuite_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// waitTerm starts WaitForLeadership and returns its result once it has one.
func waitTerm(ctx context.Context, c *fence.Client) <-chan func() (*fence.Term, error) {
	result := make(chan func() (*fence.Term, error), 1)
	go func() {
		term, err := c.WaitForLeadership(ctx)
		result <- func() (*fence.Term, error) { return term, err }
	}()
	return result
}

// await returns the result of waitTerm, failing if it takes over d of
// virtual time.
func await(t *testing.T, result <-chan func() (*fence.Term, error), d time.Duration) (*fence.Term, error) {
	t.Helper()
	select {
	case r := <-result:
		return r()
	case <-time.After(d):
		t.Fatalf("WaitForLeadership did not return within %v", d)
		return nil, nil
	}
}

func mustLead(t *testing.T, sc *sidecar) *fence.Term {
	t.Helper()
	term, err := sc.client.WaitForLeadership(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(term.Close)
	return term
}

func TestWaitForLeadershipBlocksUntilLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newSidecar(t, following("app-1_2"))
		result := waitTerm(t.Context(), sc.client)
		time.Sleep(time.Hour)
		synctest.Wait()
		if len(result) != 0 {
			t.Fatal("WaitForLeadership returned while a follower")
		}
		sc.Set(leading(5, 10*time.Second))
		term, err := await(t, result, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer term.Close()
		if term.Token() != 5 || !term.ValidUntil().Equal(time.Now().Add(10*time.Second)) || term.Err() != nil {
			t.Fatalf("term: token %d, valid until %v, err %v", term.Token(), term.ValidUntil(), term.Err())
		}
	})
}

func TestTermEnds(t *testing.T) {
	cases := []struct {
		name string
		end  func(sc *sidecar, term *fence.Term, cancel context.CancelFunc)
		want error
		says string // in the cause's message
	}{
		{"the sidecar reports not leader", func(sc *sidecar, _ *fence.Term, _ context.CancelFunc) { sc.Set(following("app-1_2")) }, fence.ErrLeadershipLost, "not leader"},
		{"the sidecar releases", func(sc *sidecar, _ *fence.Term, _ context.CancelFunc) { sc.Release(context.Background()) }, fence.ErrLeadershipLost, "not leader"},
		{"the token changes", func(sc *sidecar, _ *fence.Term, _ context.CancelFunc) { sc.Set(leading(6, time.Minute)) }, fence.ErrLeadershipLost, "replaced by token 6"},
		{"the stream breaks", func(sc *sidecar, _ *fence.Term, _ context.CancelFunc) { sc.breakStreams() }, fence.ErrDisconnected, ""},
		{"the claim lapses", func(*sidecar, *fence.Term, context.CancelFunc) { time.Sleep(time.Minute) }, nil, ""},
		{"Close", func(_ *sidecar, term *fence.Term, _ context.CancelFunc) { term.Close() }, fence.ErrTermClosed, ""},
		{"the parent context ends", func(_ *sidecar, _ *fence.Term, cancel context.CancelFunc) { cancel() }, context.Canceled, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc := newSidecar(t, leading(5, time.Minute))
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				term, err := sc.client.WaitForLeadership(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer term.Close()
				time.Sleep(30 * time.Second)
				synctest.Wait()
				if term.Err() != nil {
					t.Fatalf("term over before anything happened: %v", term.Err())
				}
				c.end(sc, term, cancel)
				synctest.Wait()
				select {
				case <-term.Done():
				default:
					t.Fatal("term not over")
				}
				if c.want == nil { // the sidecar's lapse event and the Term's timer agree
					if !errors.Is(term.Err(), fence.ErrLeadershipLost) && !errors.Is(term.Err(), fence.ErrLeadershipExpired) {
						t.Fatalf("cause %v, want lost or expired", term.Err())
					}
				} else if !errors.Is(term.Err(), c.want) || !errors.Is(context.Cause(term.Context()), c.want) {
					t.Fatalf("cause %v, want %v", term.Err(), c.want)
				}
				if !strings.Contains(fmt.Sprint(term.Err()), c.says) {
					t.Fatalf("cause %q, want it to say %q", term.Err(), c.says)
				}
			})
		})
	}
}

// The Term's own timer ends it at ValidUntil even if the sidecar says
// nothing (it may be the one that is paused); each renewal moves it.
func TestTermExpiresWithoutRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		events := make(chan string, 1)
		sc := newScriptedSidecar(t, nil, script(events, true))
		start := time.Now()
		events <- leaderEvent(5, start.Add(10*time.Second))
		term := mustLead(t, sc)

		time.Sleep(8 * time.Second)
		events <- leaderEvent(5, start.Add(18*time.Second)) // a renewal
		time.Sleep(10*time.Second - time.Nanosecond)
		synctest.Wait()
		if term.Err() != nil || !term.ValidUntil().Equal(start.Add(18*time.Second)) {
			t.Fatalf("just before the renewed expiry: err %v, valid until %v", term.Err(), term.ValidUntil())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !errors.Is(term.Err(), fence.ErrLeadershipExpired) {
			t.Fatalf("at the renewed expiry: cause %v, want ErrLeadershipExpired", term.Err())
		}
	})
}

func TestWaitForLeadershipRetriesWhileTheSidecarIsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newSidecar(t, leading(2, time.Minute))
		sc.setDown(errors.New("connection refused"))
		result := waitTerm(t.Context(), sc.client)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if len(result) != 0 {
			t.Fatal("WaitForLeadership returned while the sidecar was down")
		}
		sc.setDown(nil)
		term, err := await(t, result, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		term.Close()
	})
}

func TestWaitForLeadershipGivesUpWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newSidecar(t, following("app-1_2"))
		sc.setDown(errors.New("connection refused"))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		term, err := sc.client.WaitForLeadership(ctx)
		if term != nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("WaitForLeadership = %v, %v; want the deadline and the last error", term, err)
		}
	})
}

// A claim whose validUntil has already passed is not leadership.
func TestWaitForLeadershipIgnoresALapsedClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		events := make(chan string, 1)
		sc := newScriptedSidecar(t, nil, script(events, true))
		events <- leaderEvent(5, time.Now())
		result := waitTerm(t.Context(), sc.client)
		synctest.Wait()
		if len(result) != 0 {
			t.Fatal("WaitForLeadership returned on a lapsed claim")
		}
		events <- leaderEvent(6, time.Now().Add(time.Second))
		term, err := await(t, result, time.Minute)
		if err != nil || term.Token() != 6 {
			t.Fatalf("WaitForLeadership = %v, %v; want token 6", term, err)
		}
		term.Close()
	})
}

func TestTermFollowsRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newSidecar(t, leading(5, time.Minute))
		term := mustLead(t, sc)
		for range 5 {
			time.Sleep(50 * time.Second)
			sc.Set(leading(5, time.Minute)) // renewed: same token, later validUntil
			synctest.Wait()
			if term.Err() != nil || !term.ValidUntil().Equal(time.Now().Add(time.Minute)) {
				t.Fatalf("after a renewal: err %v, valid until %v", term.Err(), term.ValidUntil())
			}
		}
	})
}
