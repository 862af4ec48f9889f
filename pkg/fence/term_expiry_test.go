// testing/synctest needs Go 1.25 and the timers of Go 1.23, while the
// package itself builds with Go 1.22 (go.mod), whose timers are the default
// here.

//go:build go1.25

//go:debug asynctimerchan=0

package fence

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// stalledTerm is a Term whose monitor goroutine has not run since it was
// made: what a process sees when it wakes from a pause (GC, SIGSTOP) past
// ValidUntil before the Go scheduler has run the Term's timer.
func stalledTerm(validUntil time.Time) *Term {
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan struct{})
	close(done) // no monitor: nothing but the clock can end this term
	return &Term{id: TermID{Token: 5, Holder: "app-0_1"}, validUntil: validUntil, ctx: ctx, cancel: cancel, done: done}
}

// Err, Done and Context judge ValidUntil against the clock at the moment of
// the call, as the sidecar's /leader does, not by a timer that a paused
// process may not have run yet.
func TestTermIsOverAtValidUntilEvenIfItsTimerHasNotRun(t *testing.T) {
	cases := []struct {
		name    string
		elapsed time.Duration // since the term was made, valid for 10s
		over    bool
	}{
		{"just before ValidUntil", 10*time.Second - time.Nanosecond, false},
		{"at ValidUntil", 10 * time.Second, true},
		{"long after ValidUntil", time.Hour, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				term := stalledTerm(time.Now().Add(10 * time.Second))
				defer term.Close()
				time.Sleep(c.elapsed)

				err := term.Err()
				if c.over != errors.Is(err, ErrLeadershipExpired) || (!c.over && err != nil) {
					t.Fatalf("Err() = %v, want expired: %v", err, c.over)
				}
				closed := false
				select {
				case <-term.Done():
					closed = true
				default:
				}
				if closed != c.over {
					t.Fatalf("Done() closed: %v, want %v", closed, c.over)
				}
				if cause := context.Cause(term.Context()); c.over != errors.Is(cause, ErrLeadershipExpired) {
					t.Fatalf("context.Cause(Context()) = %v, want expired: %v", cause, c.over)
				}
			})
		})
	}
}

// Once the clock has ended a term, a late renewal cannot revive it: the
// first reason a term ended is its reason.
func TestTermEndedByTheClockStaysEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		term := stalledTerm(time.Now().Add(time.Second))
		defer term.Close()
		time.Sleep(time.Second)
		if err := term.Err(); !errors.Is(err, ErrLeadershipExpired) {
			t.Fatalf("Err() = %v, want ErrLeadershipExpired", err)
		}
		term.mu.Lock()
		term.validUntil = time.Now().Add(time.Hour) // a renewal arriving late
		term.mu.Unlock()
		if err := term.Err(); !errors.Is(err, ErrLeadershipExpired) {
			t.Fatalf("Err() after a late renewal = %v, want ErrLeadershipExpired still", err)
		}
	})
}

// A ShardTerm ends at its ValidUntil by its own timer, with no call to
// wake it, unless a renewal moved ValidUntil first; a late renewal does
// not revive it.
func TestShardTermLapsesAtValidUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		id := ShardTermID{Group: "billing", Shards: 8, Shard: 2, TermID: TermID{Token: 4, Holder: "a_1"}}
		term := newShardTerm(context.Background(), id, ShardJSON{Shard: 2, Token: 4, State: ShardHeld, ValidUntil: time.Now().Add(10 * time.Second)})
		defer term.Close()
		time.Sleep(5 * time.Second)
		term.renew(time.Now().Add(10 * time.Second)) // now valid until 15s
		time.Sleep(10*time.Second - time.Nanosecond)
		synctest.Wait()
		if term.ctx.Err() != nil {
			t.Fatalf("over at 15s-1ns: %v; the renewal moved ValidUntil to 15s", context.Cause(term.ctx))
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if cause := context.Cause(term.ctx); !errors.Is(cause, ErrLeadershipExpired) {
			t.Fatalf("at ValidUntil the timer left the term with cause %v, want ErrLeadershipExpired", cause)
		}
		term.renew(time.Now().Add(time.Hour))
		if err := term.Err(); !errors.Is(err, ErrLeadershipExpired) {
			t.Fatalf("after a late renewal: %v, want ErrLeadershipExpired still", err)
		}
	})
}
