package fence

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// WaitForLeadership blocks until the sidecar reports that this replica
// leads, and returns the Term it leads in. It follows /leader/watch and
// keeps retrying while the sidecar cannot be reached, until ctx is done; the
// error then names the last failure.
//
// The Term keeps following the sidecar: its Context is cancelled the moment
// the term is over, whatever the reason. Call Close when done with it.
//
// If the sidecar leads in a term that does not follow one this Client has
// delivered (a replaced or reset store), WaitForLeadership returns at once
// with an error wrapping ErrTokenRegressed that names both terms, so that
// the application can log it and alert. Called again, it waits past that
// term (reporting a further refused term once each) until the sidecar leads
// with a token above the highest delivered.
func (c *Client) WaitForLeadership(ctx context.Context) (*Term, error) {
	tctx, cancel := context.WithCancelCause(ctx)
	states := make(chan State)
	go c.follow(tctx, states, nil)
	var lastErr error
	for s := range states {
		if s.Err != nil {
			lastErr = s.Err
		}
		if c.firstReport(s.Err) {
			cancel(nil)
			for range states { // closed once follow sees tctx done
			}
			return nil, fmt.Errorf("fence: waiting for leadership: %w", s.Err)
		}
		if !s.Leader || !time.Now().Before(s.ValidUntil) {
			continue
		}
		t := &Term{id: s.TermID(), validUntil: s.ValidUntil, ctx: tctx, cancel: cancel, done: make(chan struct{})}
		go t.monitor(states)
		return t, nil
	}
	cancel(nil)
	err := fmt.Errorf("fence: waiting for leadership: %w", context.Cause(ctx))
	if lastErr != nil {
		err = fmt.Errorf("%w (last error: %v)", err, lastErr)
	}
	return nil, err
}

// Term is one term of leadership of this replica, from WaitForLeadership.
// Attach ID to every write of the term; stop starting work once Err is not
// nil. The guards, not the Term, are what make a late write harmless.
type Term struct {
	id     TermID
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when monitor has returned

	mu         sync.Mutex
	validUntil time.Time
}

// ID is what the term's writes present to a guard: its token and this
// sidecar's identity.
func (t *Term) ID() TermID { return t.id }

// Token is the fencing token of the term (>= 1).
func (t *Term) Token() int64 { return t.id.Token }

// ValidUntil is when the term lapses unless the sidecar renews it; each
// renewal the sidecar reports moves it later.
func (t *Term) ValidUntil() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.validUntil
}

// Context is cancelled when the term is over: the sidecar reports not
// leader or another term (cause ErrLeadershipLost; ErrTokenRegressed if
// that term does not follow this one), the stream to it breaks
// (ErrDisconnected), ValidUntil passes without a renewal
// (ErrLeadershipExpired), Close is called (ErrTermClosed), or the context
// given to WaitForLeadership is done. context.Cause tells which.
//
// Context, Done and Err first compare the clock with ValidUntil, so each
// call sees an expiry at once, even when this process was paused past
// ValidUntil and the Term's timer has not run yet. A context or channel
// already in hand is closed by that timer, or by the next call; for the
// decision right before a write, call Err.
func (t *Term) Context() context.Context {
	t.endIfLapsed()
	return t.ctx
}

// Done is closed when the term is over; see Context.
func (t *Term) Done() <-chan struct{} {
	t.endIfLapsed()
	return t.ctx.Done()
}

// Err is nil while the term lasts, then why it ended; see Context. It is
// ErrLeadershipExpired from the moment the clock reaches ValidUntil.
func (t *Term) Err() error {
	t.endIfLapsed()
	if t.ctx.Err() == nil {
		return nil
	}
	return context.Cause(t.ctx)
}

// endIfLapsed ends the term if the clock has reached ValidUntil. A term
// already over keeps its first cause.
func (t *Term) endIfLapsed() {
	if t.ctx.Err() != nil {
		return
	}
	if until := t.ValidUntil(); !time.Now().Before(until) {
		t.cancel(expired(until))
	}
}

func expired(validUntil time.Time) error {
	return fmt.Errorf("%w: valid until %s", ErrLeadershipExpired, validUntil.Format(time.RFC3339Nano))
}

// Close ends the term if it is not over yet and waits for its goroutines to
// stop. It is safe to call more than once.
func (t *Term) Close() {
	t.cancel(ErrTermClosed)
	<-t.done
}

// monitor ends the term on the first sign that it is over. states is closed
// once the term's context is done.
func (t *Term) monitor(states <-chan State) {
	defer close(t.done)
	lapse := time.NewTimer(time.Until(t.validUntil))
	defer lapse.Stop()
	for {
		select {
		case s, ok := <-states:
			switch {
			case !ok:
				return
			case s.Err != nil:
				t.cancel(s.Err)
			case !s.Leader:
				t.cancel(fmt.Errorf("%w: the sidecar reports not leader (holder %q)", ErrLeadershipLost, s.Holder))
			case s.TermID() != t.id:
				t.cancel(fmt.Errorf("%w: %v replaced by %v", ErrLeadershipLost, t.id, s.TermID()))
			default:
				t.mu.Lock()
				t.validUntil = s.ValidUntil
				t.mu.Unlock()
				// Stop and drain first: a Go 1.22 timer that fired
				// before Reset keeps its value in C.
				if !lapse.Stop() {
					select {
					case <-lapse.C:
					default:
					}
				}
				lapse.Reset(time.Until(s.ValidUntil))
			}
		case <-lapse.C:
			t.cancel(expired(t.ValidUntil()))
		}
	}
}
