// Package fencetest holds the rules every fencing guard follows, as steps a
// test replays against a guard: fence.MemoryGuard, fence.SQLGuard, or a
// guard an application writes for a store of its own (a conditional write
// in an object store, a compare in etcd). A guard that answers every step
// as GuardSteps says refuses stale and reused terms as the sidecar's
// documentation promises.
//
// It uses the standard library only, like package fence.
package fencetest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// Term is the term of the leader with token when tokens never repeat: one
// holder per token, "app-<token>_1".
func Term(token int64) fence.TermID {
	return fence.TermID{Token: token, Holder: fmt.Sprintf("app-%d_1", token)}
}

// GuardStep is one write to a resource and what the guard must answer.
type GuardStep struct {
	Name string
	Term fence.TermID
	// Want is nil when the write must be accepted, else the error it must
	// be refused with: fence.ErrStaleToken, fence.ErrTokenReused or
	// fence.ErrInvalidToken.
	Want error
}

// GuardSteps are writes to one resource, in this order, starting from a
// resource no term has written, and what a guard must answer each.
func GuardSteps() []GuardStep {
	return []GuardStep{
		{"first write", Term(3), nil},
		{"higher token", Term(5), nil},
		{"same term again", Term(5), nil},
		{"equal token from another holder", fence.TermID{Token: 5, Holder: "app-5_2"}, fence.ErrTokenReused},
		{"lower token", Term(4), fence.ErrStaleToken},
		{"zero token", Term(0), fence.ErrStaleToken},
		{"negative token", Term(-1), fence.ErrInvalidToken},
		{"no holder", fence.TermID{Token: 6}, fence.ErrInvalidToken},
		{"the first holder again", Term(5), nil},
		{"the other holder with a higher token", fence.TermID{Token: 6, Holder: "app-5_2"}, nil},
		{"the first holder, now behind", Term(5), fence.ErrStaleToken},
	}
}

// CheckAnswer returns nil if err, a guard's answer to a write of term, is
// what want says: nil for an accepted write; else an error matching want,
// wrapping fence.ErrTokenReused exactly when want is ErrTokenReused, and,
// for a refusal, naming the refused term's holder.
func CheckAnswer(err error, term fence.TermID, want error) error {
	switch {
	case want == nil && err != nil:
		return fmt.Errorf("%v refused: %w", term, err)
	case !errors.Is(err, want):
		return fmt.Errorf("%v: %v, want %v", term, err, want)
	case errors.Is(want, fence.ErrStaleToken) && errors.Is(err, fence.ErrTokenReused) != (want == fence.ErrTokenReused):
		return fmt.Errorf("%v: %v; want ErrTokenReused exactly for an equal token", term, err)
	case errors.Is(want, fence.ErrStaleToken) && !strings.Contains(err.Error(), term.Holder):
		return fmt.Errorf("%v: %q does not name the refused holder", term, err)
	}
	return nil
}
