package fence

import (
	"fmt"
	"sync"
)

// MemoryGuard fences resources that live in this process (or that this
// process alone writes): it remembers, per resource name, the last term
// whose write succeeded, and runs a write only if its term follows that
// one: a higher token, or the same token from the same holder (the same
// term writing again). A lower token is refused with ErrStaleToken, an
// equal token from another holder with ErrTokenReused.
//
// Writes to the guarded resources must all go through Do: the check and the
// write happen under one lock, so no newer term can be accepted between
// them. The zero value is ready to use; a MemoryGuard must not be copied.
//
// A MemoryGuard fences nothing across processes: two replicas each have
// their own. Use it for state this process owns (a cache it warms, a file
// it alone writes), as a test double, and as the model of what a shared
// resource must do itself. For a resource in another system, put the same
// check where the data lives, atomically with the write: SQLGuard for SQL;
// for other stores, a conditional write (a compare on a token key in etcd,
// a write conditioned on a version or a stored token and holder elsewhere).
type MemoryGuard struct {
	mu       sync.Mutex
	accepted map[string]TermID
}

// NewMemoryGuard returns an empty MemoryGuard.
func NewMemoryGuard() *MemoryGuard { return &MemoryGuard{} }

// Do runs write if term follows the last term accepted for resource, and
// records term as accepted if write returns nil. A refused term returns an
// error wrapping ErrStaleToken (ErrTokenReused for an equal token from
// another holder) without running write; a negative token or an empty
// holder, ErrInvalidToken. Writes to all resources of the guard are
// serialised; write must not call Do on the same guard.
func (g *MemoryGuard) Do(resource string, term TermID, write func() error) error {
	if err := term.check(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if accepted, ok := g.accepted[resource]; ok && !term.follows(accepted) {
		return refusal(resource, accepted, term)
	}
	if err := write(); err != nil {
		return err
	}
	if g.accepted == nil {
		g.accepted = make(map[string]TermID)
	}
	g.accepted[resource] = term
	return nil
}

// DoShard is Do for the data of one shard of a shard group: it runs write
// if term follows the last term accepted for the shard's resource
// (term.Resource(), "<group>/<N>/shard-<i>"). Each shard has its own last
// accepted term, as it has its own election and tokens. A term with no
// group, no count, or a shard outside its count returns ErrInvalidToken.
func (g *MemoryGuard) DoShard(term ShardTermID, write func() error) error {
	if err := term.check(); err != nil {
		return err
	}
	return g.Do(term.Resource(), term.TermID, write)
}

// Accepted returns the last term accepted for resource (the highest token,
// and the holder that wrote with it), and false if none has been.
func (g *MemoryGuard) Accepted(resource string) (TermID, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	term, ok := g.accepted[resource]
	return term, ok
}

// maxNameInError bounds how much of a resource or holder name an error
// repeats.
const maxNameInError = 128

// shortName is a name for an error message: whole if short, else its
// beginning and its length.
func shortName(name string) string {
	if len(name) <= maxNameInError {
		return name
	}
	return fmt.Sprintf("%s... (%d bytes)", name[:maxNameInError], len(name))
}
