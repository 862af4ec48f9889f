// Package fence is what a Go application uses next to the leader-sidecar: a
// client for the sidecar's localhost API, and a guard that makes a resource
// refuse writes from a leader whose term is over.
//
// # What is guaranteed, and by what
//
// The fencing token is the real guarantee. Every term has a token one higher
// than the last, and a resource that remembers the highest token it has
// accepted and refuses a lower one rejects the write of a stale leader, no
// matter how long that leader was paused between checking and writing. A
// write is safe only if its resource checks the token atomically with the
// write itself: [SQLGuard] does so inside the caller's own SQL transaction,
// [MemoryGuard] under a lock around the caller's function.
//
// Everything else only narrows the window in which a stale leader works:
//
//   - [Client.State] answers what the sidecar believes now. Any error means
//     "not leader": a sidecar that does not answer cannot vouch for anyone.
//   - [Term.Err] is non-nil from the moment the sidecar reports that the
//     term is over, the stream to it breaks, or this process's clock reaches
//     the term's ValidUntil without a renewal. The clock is read at each
//     call, so a process paused past ValidUntil sees the expiry on its first
//     call after waking, before any timer has run; [Term.Done] and
//     [Term.Context] are closed by a timer at ValidUntil and by any call
//     that finds the term lapsed. Stop starting new work then; work already
//     started is stopped only by the token check.
//
// A process can be paused after any check and before its write lands, so
// neither a fresh answer nor a live Term proves that a write is still safe.
// Only the resource's check does.
//
// # Using it
//
//	c, err := fence.NewClient("") // the sidecar at http://127.0.0.1:4040
//	guard, err := fence.NewSQLGuard("") // table fence_tokens
//	for ctx.Err() == nil {
//		term, err := c.WaitForLeadership(ctx) // blocks while a follower
//		if err != nil {
//			return err // ctx is done
//		}
//		for term.Err() == nil { // until the term is over
//			tx, err := db.BeginTx(term.Context(), nil)
//			err = guard.Check(term.Context(), tx, "billing", term.Token())
//			// on error (fence.ErrStaleToken: a newer leader exists): tx.Rollback()
//			// else the write, in tx, then tx.Commit()
//		}
//		term.Close()
//	}
//
// The sidecar and the application share a host, so ValidUntil (the
// sidecar's wall clock) is compared with this process's wall clock.
package fence

import "errors"

var (
	// ErrStaleToken is returned by the guards when the token is lower than
	// one the resource has already accepted: a newer leader exists, and the
	// write must not happen.
	ErrStaleToken = errors.New("fence: stale token: a newer leader has written")
	// ErrInvalidToken is returned by the guards for a negative token.
	ErrInvalidToken = errors.New("fence: invalid token: must be >= 0")
	// ErrBadResponse wraps answers from the sidecar that this client cannot
	// use: an unexpected status, a body that is not the documented JSON, a
	// malformed event stream.
	ErrBadResponse = errors.New("fence: unusable answer from the sidecar")
	// ErrDisconnected is the error of the state [Client.Watch] delivers when
	// its stream to the sidecar ends, and the cause of a Term ended that way.
	ErrDisconnected = errors.New("fence: lost the stream from the sidecar")
	// ErrLeadershipLost is the cause of a Term ended because the sidecar
	// reported that this replica no longer leads, or leads with another token.
	ErrLeadershipLost = errors.New("fence: leadership lost")
	// ErrLeadershipExpired is the cause of a Term whose ValidUntil passed
	// without a renewal.
	ErrLeadershipExpired = errors.New("fence: leadership expired without renewal")
	// ErrTermClosed is the cause of a Term ended by [Term.Close].
	ErrTermClosed = errors.New("fence: term closed")
)
