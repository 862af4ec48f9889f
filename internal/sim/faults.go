package sim

import (
	"fmt"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// drawProfile picks how the store behaves in this schedule.
func drawProfile(w *world) profile {
	latencies := []time.Duration{time.Millisecond, 20 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second}
	return profile{
		latency:    latencies[w.rng.IntN(len(latencies))],
		slowChance: []float64{0, 0.01, 0.1}[w.rng.IntN(3)],
		slowMax:    w.opts.slowMax(),
		failChance: []float64{0, 0.02, 0.2}[w.rng.IntN(3)],
		watchDelay: []time.Duration{10 * time.Millisecond, 500 * time.Millisecond, 5 * time.Second}[w.rng.IntN(3)],
		dropChance: []float64{0, 0.1, 0.5}[w.rng.IntN(3)],
	}
}

// fault is one kind of trouble; it reports what it did, or "" if it did
// not apply now.
type fault struct {
	weight int
	do     func(w *world) string
}

var faults = []fault{
	{3, func(w *world) string { // SIGSTOP, then SIGCONT
		c := w.pick()
		if c == nil {
			return ""
		}
		c.pause(w.upToQuiet(w.between(0, 3*w.opts.LeaseDuration)))
		return "pause " + c.id
	}},
	{2, func(w *world) string { // kill -9, then a new process
		c := w.pick()
		if c == nil {
			return ""
		}
		w.logf("%s crashes", c.id)
		c.crash()
		w.after(w.upToQuiet(w.between(0, 2*w.opts.LeaseDuration)), func() { w.startCandidate() })
		return "crash " + c.id
	}},
	{1, func(w *world) string { // SIGTERM, then a new process
		c := w.pick()
		if c == nil || !c.stop() {
			return ""
		}
		w.after(w.upToQuiet(w.between(0, w.opts.LeaseDuration)), func() { w.startCandidate() })
		return "stop " + c.id
	}},
	{2, func(w *world) string { // POST /leader/release on the leader
		for _, c := range w.live() {
			if c.e.Status().Leader && c.release() {
				return "release " + c.id
			}
		}
		return ""
	}},
	{1, func(w *world) string { return deleteRecord(w, w.elections[0]) }},
	{4, func(w *world) string { return editRecord(w, w.elections[0]) }},
	{1, func(w *world) string { // the store refuses or drops every request
		w.profile.outageUntil = w.now + w.upToQuiet(w.between(0, 3*w.opts.RenewDeadline/2))
		return fmt.Sprintf("store outage until %v", w.profile.outageUntil)
	}},
}

// deleteRecord is kubectl delete lease on el's record.
func deleteRecord(w *world, el *contest) string {
	if !el.store.present {
		return ""
	}
	el.store.remember()
	el.store.present = false
	el.store.nextVersion()
	el.edited, el.touched = true, true
	el.check.newEpoch()
	w.changed(el)
	return "delete the record" + el.suffix()
}

// editRecord is kubectl edit lease on el's record.
func editRecord(w *world, el *contest) string {
	if !el.store.present {
		return ""
	}
	rec := el.store.rec
	var what string
	switch w.rng.IntN(5) {
	case 0:
		rec.HolderIdentity, what = "", "empty the holder"
	case 1:
		rec.HolderIdentity, what = fmt.Sprintf("ghost-%d", w.rng.IntN(100)), "name a holder that does not exist"
	case 2:
		rec.Transitions += 1 + w.rng.Int64N(5)
		what = "raise the token"
	case 3:
		rec.Transitions, what = 0, "set the token to 0"
		el.check.newEpoch()
	default:
		// From 2s: an empty holder with a 1s lease and equal times is
		// the release shape, which is taken at once by design (docs/backends.md).
		rec.LeaseDurationSeconds = 2 + w.rng.Int32N(int32(longestEdit/time.Second)-1)
		what = "change the lease duration"
	}
	rec.Transitions = min(rec.Transitions, backend.MaxTransitions)
	el.store.write(rec)
	el.edited, el.touched = true, true
	w.changed(el)
	return what + el.suffix() + fmt.Sprintf(" (%s)", describe(rec, true))
}

// scheduleFaults spreads faults over the schedule up to its quiet tail.
func scheduleFaults(w *world) {
	total := 0
	for _, f := range faults {
		total += f.weight
	}
	for t := w.between(0, 2*w.opts.FaultEvery); t < w.quietFrom; t += w.between(0, 2*w.opts.FaultEvery) {
		n := w.rng.IntN(total)
		for _, f := range faults {
			if n -= f.weight; n < 0 {
				w.at(t, func() {
					if what := f.do(w); what != "" {
						w.logf("FAULT: %s", what)
					}
				})
				break
			}
		}
	}
}

// pick returns a random live candidate, or nil.
func (w *world) pick() *candidate {
	live := w.live()
	if len(live) == 0 {
		return nil
	}
	return live[w.rng.IntN(len(live))]
}

// upToQuiet shortens d so that what it delays ends before the quiet tail.
func (w *world) upToQuiet(d time.Duration) time.Duration {
	return max(0, min(d, w.quietFrom-w.now))
}
