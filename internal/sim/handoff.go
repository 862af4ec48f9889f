package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// handoffEvery is the mean time between planned hand-offs in a schedule
// that has them.
const handoffEvery = 8 * time.Second

// scheduleHandoffs gives half of the schedules planned hand-offs (POST
// /leader/handoff on whoever leads then): to a live candidate, to one that
// crashed, to a name no candidate has, or to anyone. They come from a
// random stream of their own, so a schedule without them is exactly the
// schedule its seed drew before hand-offs existed.
func scheduleHandoffs(w *world) {
	rng := rand.New(rand.NewPCG(uint64(w.opts.Seed), 0x4a0ff))
	if w.handoffs = rng.IntN(2) == 0 && !w.opts.NoHandoffs; !w.handoffs {
		return
	}
	gap := func() time.Duration { return time.Duration(rng.Int64N(int64(2 * handoffEvery))) }
	for t := gap(); t < w.quietFrom; t += gap() {
		kind, pick := rng.IntN(10), rng.Int()
		w.at(t, func() {
			if what := handoff(w, kind, pick); what != "" {
				w.logf("FAULT: %s", what)
			}
		})
	}
}

// handoff asks the leader, if one leads and its loop is between attempts,
// to hand off; kind chooses the target (0-5 a live candidate, 6 a crashed
// one, 7 no candidate's name, 8-9 anyone), pick which one.
func handoff(w *world, kind, pick int) string {
	var leader *candidate
	for _, c := range w.live() {
		if c.e.Status().Leader {
			leader = c
		}
	}
	if leader == nil {
		return ""
	}
	var live, dead []string
	for _, c := range w.candidates {
		switch {
		case c == leader:
		case c.crashed:
			dead = append(dead, c.id)
		default:
			live = append(live, c.id)
		}
	}
	to := ""
	switch {
	case kind < 6 && len(live) > 0:
		to = live[pick%len(live)]
	case kind == 6 && len(dead) > 0:
		to = dead[pick%len(dead)]
	case kind == 7:
		to = "ghost"
	}
	if !leader.handoff(to) {
		return ""
	}
	return fmt.Sprintf("hand-off from %s to %q", leader.id, to)
}

// handoff is POST /leader/handoff, when the loop is between attempts.
func (c *candidate) handoff(to string) bool {
	if c.crashed || c.paused() || c.busy {
		return false
	}
	var err error
	c.w.handoffCount.asked++
	c.start(func() { _, err = c.e.Handoff(c.ctx, to) }, func() {
		c.w.logf("%s's hand-off to %q answered: %v", c.id, to, err)
		if err == nil {
			c.w.handoffCount.done++
		}
		c.afterActivity()
	})
	return true
}

// afterActivity does what the loop would have done meanwhile: an attempt
// whose timer fired, or the handling of a change signal.
func (c *candidate) afterActivity() {
	switch {
	case c.wokeBusy:
		c.attempt()
	case c.signalled:
		c.signalled = false
		c.signal()
	}
}

// startedFor notes, when req is a hand-off's transfer, that the writer
// starts the new term on behalf of its target: the checker's rule that a
// term's token is above every token its starter had seen applies to the
// writer of the transfer, not to the target, which sees the new token
// before it first writes it.
func (w *world) startedFor(writer *candidate, req *call) {
	h := req.rec.Handoff
	if req.op != opUpdate || h.Phase != backend.HandoffTransfer {
		return
	}
	for _, c := range w.candidates {
		if _, ok := c.seenBeforeWrite[h.Token]; c.id == h.To && !ok {
			c.seenBeforeWrite[h.Token] = writer.maxSeen
		}
	}
}

// afterAccept, in a schedule with hand-offs, sometimes stops the candidate
// whose accept has just reached the store, before it hears the answer:
// paused (SIGSTOP, for up to three leases) or crashed, the target that
// dies mid-way. Only schedules with hand-offs have accepts, so the draws
// here leave the others as they were.
func (w *world) afterAccept(c *candidate) {
	kind := w.rng.IntN(8)
	if kind <= 2 {
		w.handoffCount.stopped++
	}
	switch kind {
	case 0, 1:
		w.logf("FAULT: pause %s right after its accept", c.id)
		c.pause(w.upToQuiet(w.between(0, 3*w.opts.LeaseDuration)))
	case 2:
		w.logf("FAULT: crash %s right after its accept", c.id)
		c.crash()
		w.after(w.upToQuiet(w.between(0, 2*w.opts.LeaseDuration)), func() { w.startCandidate() })
	}
}
