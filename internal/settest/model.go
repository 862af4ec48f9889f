package settest

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// Outcomes of an operation.
const (
	appendOK      = "ok"      // committed
	appendRefused = "refused" // the guard refused the term; rolled back
	appendFailed  = "failed"  // an error before the commit; rolled back
	appendUnknown = "unknown" // the commit itself failed: it may have taken effect
	finalRead     = "read"    // the read of the final list, after the run
)

// state is the list as the model sees it: its length and a hash of its
// elements in order, comparable with ==.
type state struct {
	n int
	h uint64
}

// with is the state after appending id.
func (s state) with(id int64) state {
	h := (s.h ^ uint64(id)) * 0x100000001b3
	h ^= h >> 29
	return state{s.n + 1, h}
}

// stateOf is the state of a list.
func stateOf(list []int64) state {
	var s state
	for _, id := range list {
		s = s.with(id)
	}
	return s
}

// op is one operation of the history: an append of id, or the final read.
type op struct {
	replica int
	id      int64
	term    fence.TermID
	outcome string
	read    state // the list the append read, or the final list
	call    time.Duration
	ret     time.Duration
}

// Model is the list under appends: an append that committed read the list
// as it was and wrote it with its id at the end; one refused or failed
// had no effect; one of unknown outcome had either (its return is left at
// infinity, so it may take effect at any time after its call); the final
// read returns the list.
var Model = porcupine.NondeterministicModel{
	Init: func() []any { return []any{state{}} },
	Step: func(st, _, output any) []any {
		s, o := st.(state), output.(op)
		switch o.outcome {
		case appendOK:
			if o.read == s {
				return []any{s.with(o.id)}
			}
			return nil
		case appendUnknown:
			if o.read == s {
				return []any{s, s.with(o.id)}
			}
			return []any{s}
		case finalRead:
			if o.read == s {
				return []any{s}
			}
			return nil
		default:
			return []any{s}
		}
	},
	Hash: func(st any) uint64 { return st.(state).h },
	DescribeOperation: func(_, output any) string {
		o := output.(op)
		return fmt.Sprintf("append %d in %v: %s after reading %d", o.id, o.term, o.outcome, o.read.n)
	},
}

// parseList reads the list's text: ids separated by commas.
func parseList(s string) ([]int64, error) {
	if s == "" {
		return nil, nil
	}
	var list []int64
	for f := range strings.SplitSeq(s, ",") {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("element %q: %w", f, err)
		}
		list = append(list, id)
	}
	return list, nil
}

// formatList is the list's text.
func formatList(list []int64) string {
	fs := make([]string, len(list))
	for i, id := range list {
		fs[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(fs, ",")
}
