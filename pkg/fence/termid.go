package fence

import "fmt"

// TermID names one term of leadership: its fencing token and the identity
// of the sidecar that holds it. It is what a write presents to a guard.
//
// The token alone does not always name one term. Tokens move forward while
// the store keeps its record, but a store that is replaced or reset (every
// candidate restarted and the record gone, a Lease recreated by a client-go
// candidate at transition 0 and climbed back) can hand a token already used
// to another holder. A sidecar's identity is unique per process start, so
// the pair names one term even then, and the guards accept an equal token
// only from the holder that first wrote with it.
type TermID struct {
	// Token is the fencing token of the term; the sidecar's are >= 1, the
	// guards accept any token >= 0.
	Token int64
	// Holder is the identity of the sidecar that holds the term: the
	// "identity" field of GET /leader. It must not be empty.
	Holder string
}

// String returns the term for messages, e.g. `token 7 of "web-1_4f2a"`,
// or `token 7` without a holder.
func (id TermID) String() string {
	if id.Holder == "" {
		return fmt.Sprintf("token %d", id.Token)
	}
	return fmt.Sprintf("token %d of %q", id.Token, shortName(id.Holder))
}

// check returns an error wrapping ErrInvalidToken if id cannot be
// accepted by a guard: a negative token or no holder.
func (id TermID) check() error {
	switch {
	case id.Token < 0:
		return fmt.Errorf("%w: token %d is negative", ErrInvalidToken, id.Token)
	case id.Holder == "":
		return fmt.Errorf("%w: token %d has no holder identity", ErrInvalidToken, id.Token)
	}
	return nil
}

// follows reports whether a write of term id may follow the last accepted
// term: a higher token, or the same token from the same holder (the same
// term writing again). An empty accepted holder is a row written before
// guards stored holders: the first holder to present its token binds it.
func (id TermID) follows(accepted TermID) bool {
	return id.Token > accepted.Token ||
		(id.Token == accepted.Token && (id.Holder == accepted.Holder || accepted.Holder == ""))
}

// refusal is the error for a write of term id on resource that does not
// follow the accepted term: ErrTokenReused for an equal token from another
// holder, else ErrStaleToken.
func refusal(resource string, accepted, id TermID) error {
	if id.Token == accepted.Token {
		return fmt.Errorf("%w: resource %q accepted token %d from holder %q, this write has it from holder %q",
			ErrTokenReused, shortName(resource), id.Token, shortName(accepted.Holder), shortName(id.Holder))
	}
	return fmt.Errorf("%w: resource %q accepted %v, this write has %v",
		ErrStaleToken, shortName(resource), accepted, id)
}
