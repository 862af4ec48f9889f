package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// scheduleHostileLeases gives a quarter of the lone election's schedules
// one to three writes of a hostile lease duration: the record as it
// stands (or naming a holder that does not exist), declaring a lease
// duration beyond the bound the candidates trust (Options.recordLeaseBound),
// up to the longest a Lease holds (2147483647 seconds, 68 years), as a
// client with a bug or a hand edit would write it. One in three lands in
// the last ten seconds before the quiet tail, so that the liveness check
// sees the election outlive it. They come from a random stream of their
// own, so a schedule without them is exactly the schedule its seed drew
// before they existed.
func scheduleHostileLeases(w *world) {
	rng := rand.New(rand.NewPCG(uint64(w.opts.Seed), 0x1ea5e))
	if rng.IntN(4) != 0 {
		return
	}
	bound := int64(w.opts.recordLeaseBound() / time.Second)
	for range 1 + rng.IntN(3) {
		at := time.Duration(rng.Int64N(int64(w.quietFrom)))
		if rng.IntN(3) == 0 {
			at = max(0, w.quietFrom-time.Duration(rng.Int64N(int64(10*time.Second))))
		}
		var seconds int64
		switch rng.IntN(3) {
		case 0:
			seconds = bound + 1
		case 1:
			seconds = bound + 1 + rng.Int64N(math.MaxInt32-bound)
		default:
			seconds = math.MaxInt32
		}
		ghost := rng.IntN(2) == 0
		w.at(at, func() {
			if what := hostileLease(w, w.elections[0], int32(seconds), ghost); what != "" {
				w.logf("FAULT: %s", what)
			}
		})
	}
}

// hostileLease writes el's record again with a lease duration of seconds,
// naming a holder that does not exist if ghost.
func hostileLease(w *world, el *contest, seconds int32, ghost bool) string {
	if !el.store.present {
		return ""
	}
	rec := el.store.rec
	rec.LeaseDurationSeconds = seconds
	what := "declare a hostile lease duration"
	if ghost {
		rec.HolderIdentity = "ghost-hostile"
		what += " for a holder that does not exist"
	}
	el.store.write(rec)
	el.edited, el.touched = true, true
	w.hostileLeases++
	w.changed(el)
	return what + el.suffix() + fmt.Sprintf(" (%s)", describe(rec, true))
}
