package settest

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// Verdict is what the checker found in a run.
type Verdict struct {
	Operations, Faults int
	// Outcomes of the appends.
	Acknowledged, Refused, Failed, Unknown int
	// Lost counts acknowledged appends missing from the final list,
	// Duplicated ids there more than once, Phantom ids there whose append
	// was refused, failed before its commit, or never made.
	Lost, Duplicated, Phantom int
	// Linearizable is porcupine's verdict on the history.
	Linearizable porcupine.CheckResult
}

func (v Verdict) String() string {
	return fmt.Sprintf("operations %d, faults %d, acknowledged %d, refused %d, failed %d, unknown %d, lost %d, duplicated %d, phantom %d, porcupine: %s",
		v.Operations, v.Faults, v.Acknowledged, v.Refused, v.Failed, v.Unknown, v.Lost, v.Duplicated, v.Phantom, v.Linearizable)
}

// Violated reports whether the checker found any violation.
func (v Verdict) Violated() bool {
	return v.Lost != 0 || v.Duplicated != 0 || v.Phantom != 0 || v.Linearizable != porcupine.Ok
}

// Check judges the history against the final list: every acknowledged
// append in it, no id twice, none that cannot have taken effect, and the
// history linearizable as Model (porcupine, given limit; past it the
// verdict is Unknown).
func (r *Run) Check(final []int64, limit time.Duration) Verdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	var v Verdict
	for _, n := range r.faults {
		v.Faults += n
	}
	inList := map[int64]int{}
	for _, id := range final {
		inList[id]++
	}
	mayHaveTakenEffect := map[int64]bool{}
	var ops []porcupine.Operation
	for _, o := range r.history {
		ret := o.ret.Nanoseconds()
		switch o.outcome {
		case appendOK:
			v.Acknowledged++
			mayHaveTakenEffect[o.id] = true
			if inList[o.id] == 0 {
				v.Lost++
			}
		case appendRefused:
			v.Refused++
		case appendFailed:
			v.Failed++
		case appendUnknown:
			v.Unknown++
			mayHaveTakenEffect[o.id] = true
			ret = math.MaxInt64
		}
		if o.outcome != finalRead {
			v.Operations++
		}
		ops = append(ops, porcupine.Operation{ClientId: o.replica, Input: o.id, Call: o.call.Nanoseconds(), Output: o, Return: ret})
	}
	for id, n := range inList {
		if n > 1 {
			v.Duplicated += n - 1
		}
		if !mayHaveTakenEffect[id] {
			v.Phantom++
		}
	}
	v.Linearizable = porcupine.CheckOperationsTimeout(Model.ToModel(), ops, limit)
	return v
}
