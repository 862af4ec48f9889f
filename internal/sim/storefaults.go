package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// The store's own faults, each only in the schedules of the option that
// asks for it (Options.StoreRestarts, Options.Failovers), drawn from a
// random stream of their own: without the options, every schedule is the
// one its seed drew before they existed.
//
// A restart loses nothing: the store is down for a while (every request
// fails, refused at once or timed out, and none takes effect), and the
// requests in flight when it goes down fail too, each one committed or
// not (the client cannot tell which: it gets an error either way). Every
// invariant must hold across it.
//
// A lossy failover (an asynchronous standby promoted, a backup restored)
// is a restart that comes back with the record as it was some writes
// ago, with the version it had then; the watches signal the change. The
// next writes take versions above every one issued before, as after an
// etcd backup restored with --bump-revision, or, with
// Options.ReissueVersions, hand the lost ones out again, as one restored
// without it does. A token may then be handed out twice, and for the
// terms the failover affected the checker lets "tokens unique and rising"
// and "one leader at every instant" bend (checker.failedOver and
// checker.lostTerm say which terms); the guard, in a store that did not
// fail over, must still refuse every stale write and a token from a
// second holder, and a leader must be back once faults stop. With
// versions handed out again, a candidate can take a new record for one
// it saw and miss its token, which the checker reports.

// storeFaults is what the schedule's store faults did.
type storeFaults struct {
	rng *rand.Rand
	// restarts and failovers count the faults played; lostWrites the
	// writes the failovers lost; handedTwice the tokens claimed by a
	// second holder after a failover lost the first one's term.
	restarts, failovers, lostWrites, handedTwice int
	// severed counts the requests in flight cut off by a restart or a
	// failover, committedAtCrash those of them a restart committed.
	severed, committedAtCrash int
	// inflight are the requests sent and not yet known to be over.
	inflight []*call
}

// scheduleStoreFaults gives the schedule one to three restarts if
// Options.StoreRestarts, and one to two lossy failovers if
// Options.Failovers, anywhere before the quiet tail. Half the failovers
// wait for the next write that starts a term and strike within two
// seconds of it, so that they lose an acquire: a term some holder may
// already claim and write to the guard with.
func scheduleStoreFaults(w *world) {
	o := w.opts
	if !o.StoreRestarts && !o.Failovers {
		return
	}
	sf := &storeFaults{rng: rand.New(rand.NewPCG(uint64(o.Seed), 0xfa11))}
	w.storeFaults, w.storeRestarts = sf, o.StoreRestarts
	el := w.elections[0]
	el.store.keepsPast, el.store.reissues = o.Failovers, o.ReissueVersions
	when := func() time.Duration { return time.Duration(sf.rng.Int64N(int64(w.quietFrom))) }
	if o.StoreRestarts {
		for range 1 + sf.rng.IntN(3) {
			down := time.Duration(sf.rng.Int64N(int64(2 * o.LeaseDuration)))
			w.at(when(), func() { w.logf("FAULT: %s", w.restartStore(el, down)) })
		}
	}
	if o.Failovers {
		for range 1 + sf.rng.IntN(2) {
			down := time.Duration(sf.rng.Int64N(int64(o.LeaseDuration)))
			lose := 1 + sf.rng.IntN(3)
			afterAcquire := sf.rng.IntN(2) == 0
			w.at(when(), func() {
				if !afterAcquire {
					w.logf("FAULT: %s", w.failOver(el, lose, down))
					return
				}
				el.store.armed = append(el.store.armed, down)
			})
		}
	}
}

// track keeps req among the requests in flight, forgetting those over.
func (w *world) track(c *candidate, req *call) {
	sf := w.storeFaults
	req.from = c
	if len(sf.inflight) >= 64 {
		kept := sf.inflight[:0]
		for _, r := range sf.inflight {
			if !r.applied && !r.severed || r.from.pending == r {
				kept = append(kept, r)
			}
		}
		clear(sf.inflight[len(kept):])
		sf.inflight = kept
	}
	sf.inflight = append(sf.inflight, req)
}

// sever cuts off the requests in flight to el's store as it goes down:
// one not yet applied commits now with chance commit (it reached the
// store just before), or never; whoever still waits for an answer gets
// an error.
func (w *world) sever(el *contest, commit float64) {
	sf := w.storeFaults
	// Answering a request lets its candidate send the next, tracked anew
	// (and refused: the store is down by now).
	reqs := sf.inflight
	sf.inflight = nil
	for _, req := range reqs {
		c := req.from
		if c.el != el {
			continue
		}
		if !req.applied && !req.severed {
			sf.severed++
			if sf.rng.Float64() < commit {
				sf.committedAtCrash++
				w.logf("%s's %s commits as the store goes down", c.id, req.op)
				w.applySent(c, req)
			}
			req.severed = true
		}
		c.whenRunning(func() {
			if c.pending == req {
				w.logf("%s <- %s: %v (the store went down)", c.id, req.op, errUnavailable)
				c.answer(result{err: errUnavailable})
			}
		})
	}
}

// restartStore takes el's store down for down (up to the quiet tail) and
// brings it back with every committed write.
func (w *world) restartStore(el *contest, down time.Duration) string {
	w.storeFaults.restarts++
	el.store.downUntil = w.now + w.upToQuiet(down)
	w.sever(el, 0.5)
	el.touched = true
	return fmt.Sprintf("the store restarts, back at %v%s", el.store.downUntil, el.suffix())
}

// failOver takes el's store down for down (up to the quiet tail) and
// brings it back without its last lose writes (as many as it kept): the
// record, present or not, and its version as they were before them. The
// requests in flight are lost with them.
func (w *world) failOver(el *contest, lose int, down time.Duration) string {
	sf := w.storeFaults
	s := &el.store
	s.downUntil = w.now + w.upToQuiet(down)
	w.sever(el, 0)
	lose = max(0, min(lose, len(s.past)))
	sf.failovers++
	el.touched = true
	if lose == 0 {
		return fmt.Sprintf("the store fails over, losing nothing, back at %v%s", s.downUntil, el.suffix())
	}
	sf.lostWrites += lose
	was := describe(s.rec, s.present)
	back := s.past[len(s.past)-lose]
	var lost []backend.Record // what the lost writes wrote
	for _, st := range append(s.past[len(s.past)-lose+1:], storedState{rec: s.rec, present: s.present}) {
		if st.present {
			lost = append(lost, st.rec)
		}
	}
	s.past = s.past[:len(s.past)-lose]
	s.rec, s.present, s.created, s.version = back.rec, back.present, back.created, back.version
	if s.reissues {
		s.issued = s.version
	}
	// The record changed without a candidate's write: as after a hand
	// edit, a write need not follow the record it replaces.
	el.edited = true
	token := int64(0)
	if s.present {
		token = s.rec.Transitions
	}
	el.check.failedOver(token, lost)
	w.changed(el)
	return fmt.Sprintf("the store fails over, losing its last %d writes (%s, back to %s v%d), back at %v%s",
		lose, was, describe(s.rec, s.present), s.version, s.downUntil, el.suffix())
}

// strikeAfterAcquire, once a write of rec over prev (present or not)
// that starts a term (a new holder, or a new token) has been applied to
// el's store, arms the failover waiting for one: it strikes within two
// seconds, losing that write and those after it.
func (w *world) strikeAfterAcquire(el *contest, prev backend.Record, present bool, rec backend.Record) {
	s := &el.store
	if len(s.armed) == 0 || rec.HolderIdentity == "" ||
		present && rec.Transitions == prev.Transitions && rec.HolderIdentity == prev.HolderIdentity {
		return
	}
	down := s.armed[0]
	s.armed = s.armed[1:]
	writes := s.writes
	w.after(time.Duration(w.storeFaults.rng.Int64N(int64(2*time.Second))), func() {
		if w.now >= w.quietFrom {
			return
		}
		// Lose the acquire and every write since, as far as they are kept.
		w.logf("FAULT: %s", w.failOver(el, int(s.writes-writes)+1, down))
	})
}
