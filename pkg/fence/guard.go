package fence

import (
	"fmt"
	"sync"
)

// MemoryGuard fences resources that live in this process (or that this
// process alone writes): it remembers, per resource name, the highest token
// whose write succeeded, and runs a write only if its token is not lower.
// Equal tokens are accepted: the same term writing again.
//
// Writes to the guarded resources must all go through Do: the check and the
// write happen under one lock, so no newer token can be accepted between
// them. The zero value is ready to use; a MemoryGuard must not be copied.
//
// A MemoryGuard fences nothing across processes: two replicas each have
// their own. Use it for state this process owns (a cache it warms, a file
// it alone writes), as a test double, and as the model of what a shared
// resource must do itself. For a resource in another system, put the same
// check where the data lives, atomically with the write: SQLGuard for SQL;
// for other stores, a conditional write (a compare on a token key in etcd,
// a write conditioned on a version or a stored token elsewhere).
type MemoryGuard struct {
	mu      sync.Mutex
	highest map[string]int64
}

// NewMemoryGuard returns an empty MemoryGuard.
func NewMemoryGuard() *MemoryGuard { return &MemoryGuard{} }

// Do runs write if token is not lower than the highest token accepted for
// resource, and records token as accepted if write returns nil. A stale
// token returns an error wrapping ErrStaleToken without running write; a
// negative one, ErrInvalidToken. Writes to all resources of the guard are
// serialised; write must not call Do on the same guard.
func (g *MemoryGuard) Do(resource string, token int64, write func() error) error {
	if token < 0 {
		return fmt.Errorf("%w: %d", ErrInvalidToken, token)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if highest, ok := g.highest[resource]; ok && token < highest {
		return fmt.Errorf("%w: resource %q accepted token %d, this write has %d", ErrStaleToken, shortName(resource), highest, token)
	}
	if err := write(); err != nil {
		return err
	}
	if g.highest == nil {
		g.highest = make(map[string]int64)
	}
	g.highest[resource] = token
	return nil
}

// Highest returns the highest token accepted for resource, and false if
// none has been.
func (g *MemoryGuard) Highest(resource string) (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	token, ok := g.highest[resource]
	return token, ok
}

// maxNameInError bounds how much of a resource name an error repeats.
const maxNameInError = 128

// shortName is a resource name for an error message: whole if short, else
// its beginning and its length.
func shortName(name string) string {
	if len(name) <= maxNameInError {
		return name
	}
	return fmt.Sprintf("%s... (%d bytes)", name[:maxNameInError], len(name))
}
