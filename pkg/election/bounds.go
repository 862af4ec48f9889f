package election

import (
	"context"
	"errors"
	"time"

	"k8s.io/utils/clock"
)

// within returns a context that ends when parent does or once d has
// passed on the candidate's Clock, whichever comes first: every bound the
// elector puts on its own work (an attempt, a check, a hand-off, the
// release on shutdown) is one, so that a caller who keeps time for it
// (Config.Clock: a fake clock, a deterministic simulator) also ends that
// work. Once d has passed its Err is context.DeadlineExceeded, as a
// timeout's is.
//
// On the real clock it is context.WithTimeout, whose deadline also reaches
// the backend's requests. On another clock it waits with the clock's
// AfterFunc when it has one (clock.WithDelayedExecution: the callback
// runs on whatever goroutine the clock fires it on, and needs none of its
// own), else on a timer of the clock; its deadline is the parent's, as
// the instant d ends is on a clock the backends do not read.
func (e *Elector) within(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	switch c := e.cfg.Clock.(type) {
	case clock.RealClock, *clock.RealClock:
		return context.WithTimeout(parent, d)
	case clock.WithDelayedExecution:
		ctx, cancel := context.WithCancelCause(parent)
		t := c.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
		return clockBound{ctx}, func() {
			t.Stop()
			cancel(context.Canceled)
		}
	default:
		ctx, cancel := context.WithCancelCause(parent)
		t := c.NewTimer(d)
		go func() {
			select {
			case <-t.C():
				cancel(context.DeadlineExceeded)
			case <-ctx.Done():
			}
		}()
		return clockBound{ctx}, func() {
			t.Stop()
			cancel(context.Canceled)
		}
	}
}

// clockBound is a context ended by a bound on the Clock: its Err says
// context.DeadlineExceeded when the bound ended it, as a timeout's does,
// where a context cancelled with a cause says context.Canceled.
type clockBound struct{ context.Context }

func (b clockBound) Err() error {
	err := b.Context.Err()
	if err != nil && errors.Is(context.Cause(b.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}
