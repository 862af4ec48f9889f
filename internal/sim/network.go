package sim

import (
	"errors"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

var (
	errUnavailable = errors.New("store unavailable")
	errTimeout     = errors.New("request timed out")
)

// profile is how the store behaves in one schedule, outside the quiet
// tail: most requests take up to latency each way, some are slow (up to
// beyond the renew deadline), some fail.
type profile struct {
	latency    time.Duration
	slowChance float64
	slowMax    time.Duration
	failChance float64
	// outageUntil makes every request fail until then.
	outageUntil time.Duration
	// watchDelay and dropChance shape the change signals.
	watchDelay time.Duration
	dropChance float64
}

// quiet is the store once faults have stopped.
var quiet = profile{latency: 20 * time.Millisecond, watchDelay: 50 * time.Millisecond}

func (w *world) currentProfile() profile {
	if w.now >= w.quietFrom {
		return quiet
	}
	return w.profile
}

// send carries a request to the store and its answer back. The request
// takes effect at the instant it reaches the store; its answer may be
// late, lost, or replaced by a timeout, as with a real client whose
// request outlives its timeout (the sidecar's Lease client gives each
// request half the renew deadline).
func (w *world) send(c *candidate, req *call) {
	p := w.currentProfile()
	timeout := w.opts.RenewDeadline / 2
	there, back := w.between(0, p.latency), w.between(0, p.latency)
	if w.chance(p.slowChance) {
		there = w.between(p.latency, p.slowMax)
	}
	deliver := func(at time.Duration, answer func() result) {
		w.at(at, func() {
			r := answer() // read now: the store applied the request earlier
			c.whenRunning(func() {
				if c.pending != req {
					return // answered already: the process crashed meanwhile
				}
				w.logf("%s <- %s: %v", c.id, req.op, r)
				c.answer(r)
			})
		})
	}
	fail := func(err error) func() result { return func() result { return result{err: err} } }
	w.logf("%s -> %s%s", c.id, req.op, requestText{req})
	if c.el.store.keepsPast || w.storeRestarts {
		w.track(c, req)
	}
	switch {
	case w.now < c.el.store.downUntil: // restarting or failing over: nothing reaches it
		if w.chance(0.5) {
			deliver(w.now+back, fail(errUnavailable))
			return
		}
		deliver(w.now+timeout, fail(errTimeout))
		return
	case w.now < p.outageUntil || w.chance(p.failChance):
		if w.chance(0.5) {
			deliver(w.now+back, fail(errUnavailable)) // refused at once
			return
		}
		if w.chance(0.5) {
			w.at(w.now+there, func() { w.applySent(c, req) }) // applied, answer lost
		}
		deliver(w.now+timeout, fail(errTimeout))
		return
	}
	there, through := w.throttle(there, timeout)
	if !through {
		deliver(w.now+timeout, fail(errThrottled))
		return
	}
	var r result
	w.at(w.now+there, func() { r = w.applySent(c, req) })
	if there+back >= timeout {
		deliver(w.now+timeout, fail(errTimeout))
		return
	}
	// The apply event was queued first, so it runs first even when the
	// answer takes no time.
	deliver(w.now+there+back, func() result { return r })
}

// applySent carries out a request that has reached the store, unless a
// restart or failover cut it off on the way (storefaults.go).
func (w *world) applySent(c *candidate, req *call) result {
	if req.severed {
		return result{err: errUnavailable}
	}
	req.applied = true
	if req.op == opGet && w.stale() {
		return w.readLagging(c, c.el)
	}
	return w.apply(c, req)
}

// apply carries a request out at the store now, and signals the watches
// when it changed the record.
func (w *world) apply(c *candidate, req *call) result {
	el := c.el
	before, prev, present, since := el.store.version, el.store.rec, el.store.present, el.changedAt
	r := el.store.apply(req)
	if r.err == nil && req.op != opGet {
		el.checkTokenStep(w, c, prev, present, req.rec)
		if el.store.keepsPast {
			w.strikeAfterAcquire(el, prev, present, req.rec)
		}
	}
	w.logf("store%s: %s %s by %s: %v", el.suffix(), req.op, requestText{req}, c.id, r)
	if el.store.version != before {
		w.changed(el)
	}
	if r.err == nil && req.op == opUpdate {
		w.handedOffOnStop(c, req.rec)
		w.releasedPendingOnStop(c, prev, req.rec)
		w.checkReservedTaken(c, prev, since, req.rec)
		w.checkSameRevisionWait(c, prev, since, req.rec)
	}
	if r.err == nil && req.op == opUpdate && req.rec.Handoff.Phase == backend.HandoffAccept && !c.crashed {
		w.afterAccept(c)
	}
	return r
}

// changed sends every live candidate of el's record a change signal, each
// delayed (and possibly dropped) on its own, carrying the state for its
// snapshot.
func (w *world) changed(el *contest) {
	el.changedAt = w.now
	w.rememberState(el)
	p := w.currentProfile()
	state := el.store
	for _, c := range w.liveOf(el) {
		if w.chance(p.dropChance) {
			continue
		}
		state := state
		if w.stale() {
			state = w.lagged(el)
		}
		w.after(w.between(0, p.watchDelay), func() {
			c.whenRunning(func() {
				c.snapshot = state
				c.signal()
			})
		})
	}
}

// requestText describes a request in the trace when the trace is read: a
// request is not changed once sent.
type requestText struct{ req *call }

func (t requestText) String() string { return describeRequest(t.req) }

func describeRequest(req *call) string {
	switch req.op {
	case opCreate:
		return " " + describe(req.rec, true)
	case opUpdate:
		return " v" + string(req.prev) + " " + describe(req.rec, true)
	}
	return ""
}
