package supervise

import (
	"syscall"
	"time"
)

// CMD may run only while the lock's claim lasts. The lock tells the
// supervisor of CMD (the guardian on Linux, a goroutine of the lock
// elsewhere) each new end of its claim; the supervisor stops CMD when the
// claim it last heard of ends, on its own clock, whatever the lock does
// meanwhile: dead, stopped (SIGSTOP, Ctrl-Z), starved of CPU or slow. The
// lock also tells it to stop CMD at once (leadership lost, a release or a
// hand-off asked for), and which signals to pass on to CMD's group.

// orderKind is what an order asks of CMD's supervisor.
type orderKind int

const (
	// claimOrder: the claim now ends at until.
	claimOrder orderKind = iota
	// stopOrder: the claim ends now.
	stopOrder
	// signalOrder: pass sig on to CMD's group.
	signalOrder
	// lockGoneOrder: the lock died; nothing of CMD may run on.
	lockGoneOrder
)

// order is one thing the lock tells CMD's supervisor.
type order struct {
	kind  orderKind
	until time.Time      // claimOrder, on the supervisor's own clock
	sig   syscall.Signal // signalOrder
}

// event is what the supervisor did on its own, reported to the lock.
type event int

const (
	// claimEnded: the claim ended before another was heard of; CMD's
	// group got SIGTERM (and SIGCONT, in case it was suspended).
	claimEnded event = iota + 1
	// killed: CMD outlived the kill grace after SIGTERM; its group got
	// SIGKILL.
	killed
)

// enforcer stops CMD when its claim ends or when told to.
type enforcer struct {
	// grace is the wait between SIGTERM and SIGKILL.
	grace time.Duration
	// signal sends sig to CMD's process group.
	signal func(sig syscall.Signal)
	// report tells the lock what the enforcer did on its own.
	report func(event)
}

// run enforces the claim that ends at until (the first one the lock told
// of, before CMD started) and the orders that follow, until done is
// closed (CMD has exited). Once the claim has ended, or a stop was
// ordered, it stays ended: a later claim does not undo it.
//
// Ending the claim sends SIGTERM to CMD's group, then SIGCONT (a stopped
// process acts on SIGTERM only once it runs again), and SIGKILL after the
// grace unless CMD exited first.
func (e *enforcer) run(until time.Time, orders <-chan order, done <-chan struct{}) {
	claimEnd := time.NewTimer(time.Until(until))
	defer claimEnd.Stop()
	var (
		stopping bool
		kill     <-chan time.Time
	)
	stop := func() {
		if stopping {
			return
		}
		stopping = true
		claimEnd.Stop()
		e.signal(syscall.SIGTERM)
		if sigCont != 0 {
			e.signal(sigCont)
		}
		kill = time.After(e.grace)
	}
	for {
		select {
		case <-done:
			return
		case o, ok := <-orders:
			if !ok {
				orders = nil
				continue
			}
			switch o.kind {
			case claimOrder:
				if !stopping {
					claimEnd.Reset(time.Until(o.until))
				}
			case stopOrder:
				stop()
			case signalOrder:
				e.signal(o.sig)
			case lockGoneOrder:
				stopping = true
				claimEnd.Stop()
				kill = nil
				e.signal(syscall.SIGKILL)
			}
		case <-claimEnd.C:
			// Reported first: the lock learns of it before CMD's exit.
			e.report(claimEnded)
			stop()
		case <-kill:
			kill = nil
			e.signal(syscall.SIGKILL)
			e.report(killed)
		}
	}
}
