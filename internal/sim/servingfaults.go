package sim

import (
	"errors"
	"math/rand/v2"
	"time"
)

// The faults of what serves the record rather than of the store itself,
// each only in the schedules of the option that asks for it
// (Options.StaleReads, Options.Throttling), drawn from a random stream of
// their own: without the options, every schedule is the one its seed drew
// before they existed.
//
// Stale reads: a read answered from a view that lags the store (a watch
// cache behind etcd, a second API server, a watch that relisted from
// one): a Get, and the state a change signal carries for a candidate's
// snapshot, may show the record as it was up to a lag ago, with the
// version it had then, or missing if it was missing then. The store of
// such a schedule is one that does not prove a record never created (a
// Lease: an SQL store answers from the table itself); no read lags in the
// quiet tail. Every invariant must hold: every write the election makes
// after a read is a compare-and-swap on the version it read, and a read
// never extends a claim, so a read the store has moved past costs a
// conflict, and a version seen late starts the expiry wait late, never
// early. What bends is time: a takeover waits up to the lag
// longer, and a candidate shown a token below one it saw reports it
// (TokenRegressed) although nobody edited the record.
//
// Throttling: windows in which the server refuses requests with 429 Too
// Many Requests before they reach storage, as API Priority and Fairness
// does when the election's priority level is full. A client-go client
// sends a refused request again after the Retry-After the server names
// (a second), for as long as the request's timeout allows: the request
// takes effect late, or, when its timeout ends first, fails without
// having taken effect. Every invariant must hold; what bends is
// leadership during a window: a leader whose renewals are refused until
// its renew deadline steps down, and nobody takes over while every
// write is refused.

// errThrottled is a request refused with 429 until its timeout ended: it
// never took effect.
var errThrottled = errors.New("429 Too Many Requests until the request's timeout")

// retryAfter is the Retry-After the server names with a 429, after which
// the client sends the request again.
const retryAfter = time.Second

// servingFaults are the schedule's serving faults and what they did.
type servingFaults struct {
	rng *rand.Rand
	// staleChance is the chance that a read, or a change signal, shows a
	// lagging view, lagging by up to maxLag.
	staleChance float64
	maxLag      time.Duration
	// history are the states of the record, oldest first, each with the
	// instant it began: those a view lagging by up to maxLag may show.
	history []timedState
	// staleReads counts the reads and signals that showed a state older
	// than the store's.
	staleReads int
	// windows are the throttling windows.
	windows []throttleWindow
	// throttled counts the tries refused with 429, throttledOut the
	// requests whose timeout ended before a try got through.
	throttled, throttledOut int
}

type timedState struct {
	from  time.Duration
	state storedState
}

// throttleWindow refuses each try that reaches the server in [from,
// until) with chance refuse.
type throttleWindow struct {
	from, until time.Duration
	refuse      float64
}

// scheduleServingFaults gives the schedule a lagging view if
// Options.StaleReads (a third to all of its reads lag, by up to one to
// two leases), and one to three throttling windows if Options.Throttling
// (up to two leases each, refusing half to all of the tries), before the
// quiet tail.
func scheduleServingFaults(w *world) {
	o := w.opts
	if !o.StaleReads && !o.Throttling {
		return
	}
	sf := &servingFaults{rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x5e4e))}
	w.servingFaults = sf
	if o.StaleReads {
		sf.staleChance = []float64{0.3, 0.7, 1}[sf.rng.IntN(3)]
		sf.maxLag = []time.Duration{o.RetryPeriod, o.LeaseDuration, 2 * o.LeaseDuration}[sf.rng.IntN(3)]
		sf.history = []timedState{{from: 0}}
		w.logf("reads lag: %.0f%% of them, by up to %v", 100*sf.staleChance, sf.maxLag)
	}
	if o.Throttling {
		for range 1 + sf.rng.IntN(3) {
			from := time.Duration(sf.rng.Int64N(int64(w.quietFrom)))
			long := time.Duration(sf.rng.Int64N(int64(2 * o.LeaseDuration)))
			tw := throttleWindow{from: from, until: min(from+long, w.quietFrom), refuse: []float64{0.5, 0.9, 1}[sf.rng.IntN(3)]}
			sf.windows = append(sf.windows, tw)
			w.at(tw.from, func() {
				w.logf("FAULT: the server refuses %.0f%% of requests with 429 until %v", 100*tw.refuse, tw.until)
			})
		}
	}
}

// stale reports whether this read lags, when the schedule has stale reads.
func (w *world) stale() bool {
	sf := w.servingFaults
	return sf != nil && sf.staleChance > 0 && w.now < w.quietFrom && sf.rng.Float64() < sf.staleChance
}

// lagged is el's store as a view lagging by a lag drawn up to maxLag
// shows it: the state that began last at or before that instant.
func (w *world) lagged(el *contest) store {
	sf := w.servingFaults
	at := w.now - time.Duration(sf.rng.Int64N(int64(sf.maxLag)+1))
	i := len(sf.history) - 1
	for i > 0 && sf.history[i].from > at {
		i--
	}
	s := el.store
	if i < len(sf.history)-1 {
		sf.staleReads++
		st := sf.history[i].state
		s.rec, s.present, s.created, s.version = st.rec, st.present, st.created, st.version
	}
	return s
}

// rememberState adds el's store as it is now to the states a lagging view
// may show, forgetting those no lag reaches.
func (w *world) rememberState(el *contest) {
	sf := w.servingFaults
	if sf == nil || sf.staleChance == 0 {
		return
	}
	s := el.store
	drop := 0
	for drop+1 < len(sf.history) && sf.history[drop+1].from <= w.now-sf.maxLag {
		drop++
	}
	sf.history = append(sf.history[drop:], timedState{w.now, storedState{s.rec, s.present, s.created, s.version}})
}

// readLagging answers a Get that reached el's store from a lagging view.
func (w *world) readLagging(c *candidate, el *contest) result {
	s := w.lagged(el)
	r := s.apply(&call{op: opGet})
	w.logf("store%s: Get by %s from a lagging view: %v", el.suffix(), c.id, r)
	return r
}

// throttle plays the 429s a request sent now meets on its way, the first
// try reaching the server after there: it returns when the try that gets
// through reaches it, or ok false if the request's timeout ends first.
func (w *world) throttle(there, timeout time.Duration) (arrives time.Duration, ok bool) {
	sf := w.servingFaults
	if sf == nil || len(sf.windows) == 0 {
		return there, true
	}
	p := w.currentProfile()
	at := there
	for sf.refused(w.now + at) {
		sf.throttled++
		// The refusal travels back, the client waits Retry-After and
		// sends the request again, if its timeout has not ended.
		at += time.Duration(sf.rng.Int64N(int64(p.latency)+1)) + retryAfter +
			time.Duration(sf.rng.Int64N(int64(p.latency)+1))
		if at >= timeout {
			sf.throttledOut++
			return 0, false
		}
	}
	return at, true
}

// refused reports whether a try reaching the server at t is refused.
func (sf *servingFaults) refused(t time.Duration) bool {
	for _, tw := range sf.windows {
		if t >= tw.from && t < tw.until {
			return sf.rng.Float64() < tw.refuse
		}
	}
	return false
}
