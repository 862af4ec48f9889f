// Package fence is what a Go application uses next to the leader-sidecar: a
// client for the sidecar's localhost API, and guards that make a resource
// refuse writes from a leader whose term is over.
//
// # What is guaranteed, and by what
//
// The fencing token is the real guarantee. A term is named by its token and
// the identity of the sidecar that holds it ([TermID]); each new term's
// token is one higher than the last. A guard remembers, per resource, the
// last term whose write it accepted, and accepts a write only if its term
// follows that one:
//
//   - a higher token: accepted, and the resource now belongs to that term;
//   - the same token from the same holder (the same term writing again):
//     accepted;
//   - a lower token: refused with [ErrStaleToken];
//   - the same token from another holder: refused with [ErrTokenReused]
//     (which also matches ErrStaleToken).
//
// So a stale leader's write is refused however long it was paused between
// checking and writing, and if a store that was replaced or reset ever
// hands one token to two holders, only the first of them to write can
// write that resource with it. A write is safe only if its resource checks
// the term atomically with the write itself: [SQLGuard] does so inside the
// caller's own SQL transaction, [MemoryGuard] under a lock around the
// caller's function. A guard cannot tell a reset store's low tokens from a
// stale leader's: until the store's tokens pass the highest a resource has
// accepted, the guard refuses every write to it.
//
// Everything else only narrows the window in which a stale leader works:
//
//   - [Client.State] answers what the sidecar believes now. Any error means
//     "not leader": a sidecar that does not answer cannot vouch for anyone.
//   - A [Client] never delivers a term below one it has delivered: a lower
//     token, or the same token with another identity, comes as "not
//     leader" with [ErrTokenRegressed], naming both terms. Its memory lasts
//     as long as the Client; the guards' lasts as long as their tables.
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
//		if errors.Is(err, fence.ErrTokenRegressed) {
//			log.Print(err) // the store's tokens went back; wait for a higher one
//			continue
//		}
//		if err != nil {
//			return err // ctx is done
//		}
//		for term.Err() == nil { // until the term is over
//			tx, err := db.BeginTx(term.Context(), nil)
//			err = guard.Check(term.Context(), tx, "billing", term.ID())
//			// on error (fence.ErrStaleToken: another term has written): tx.Rollback()
//			// else the write, in tx, then tx.Commit()
//		}
//		term.Close()
//	}
//
// The sidecar and the application share a host, so ValidUntil (the
// sidecar's wall clock) is compared with this process's wall clock.
//
// # Shard groups
//
// A sidecar in shard mode (--shards N) runs one election per shard, each
// with its own tokens. [Client.ShardTerms] follows its GET /shards/watch
// and hands out a [ShardTerm] for each term of a shard this replica
// begins to hold; the term ends the moment the sidecar says the shard
// drains ([ErrShardDraining]: stop, then [Client.Drained]), was released
// or lost, or is held in another term ([ErrLeadershipLost]), when its
// ValidUntil passes by this process's clock ([ErrLeadershipExpired]), or
// when the stream breaks ([ErrDisconnected]). Per shard, a Client never
// hands out a term below one it has handed out ([ErrTokenRegressed]).
//
// The guarantee is again the guard's, per shard: a write of shard i's
// data presents its [ShardTermID] (the group, its count N, the shard, the
// token and the holder) under the one resource name "<group>/<N>/shard-<i>"
// ([ShardResource]), through [MemoryGuard.DoShard] or
// [SQLGuard.CheckShard], which apply the rules above to that shard's own
// last accepted term. A term of one shard says nothing about another's
// data: write each shard's data only under its own shard's term.
//
//	terms, err := c.ShardTerms(ctx)
//	for {
//		term, err := terms.Next(ctx) // each shard term this replica begins
//		if errors.Is(err, fence.ErrTokenRegressed) {
//			log.Print(err)
//			continue
//		}
//		if err != nil {
//			return err // ctx is done
//		}
//		go func() {
//			defer term.Close()
//			for term.Err() == nil {
//				tx, err := db.BeginTx(term.Context(), nil)
//				err = guard.CheckShard(term.Context(), tx, term.ID())
//				// on error: tx.Rollback(); else the shard's write, then tx.Commit()
//			}
//			if errors.Is(term.Err(), fence.ErrShardDraining) {
//				_ = c.Drained(ctx, term.ID()) // the shard's work has stopped
//			}
//		}()
//	}
//
// # The module
//
// This package is a Go module of its own,
// github.com/leader-sidecar/leader-sidecar/pkg/fence, that needs Go 1.22
// and imports the standard library only, at run time and in its tests:
// importing it adds no other module to an application (no client-go, no
// database driver). [LeaderJSON] is the JSON the sidecar answers, and
// [ShardsJSON] and [ShardEventJSON] that of shard mode, the one definition
// its server, this client, its tests and tools share; a client in another
// language reads the same fields. Package fencetest
// holds the rules every guard follows, as steps to replay against a guard
// of an application's own.
package fence

import (
	"errors"
	"fmt"
)

var (
	// ErrStaleToken is returned by the guards when the write's term does
	// not follow the term the resource last accepted: its token is lower (a
	// newer leader has written), or it is ErrTokenReused. Either way the
	// write must not happen, and retrying it in the same term cannot help.
	ErrStaleToken = errors.New("fence: stale token")
	// ErrTokenReused is returned by the guards when the resource accepted
	// the write's token from another holder: tokens were handed out twice,
	// which only a replaced or reset store does (see [TermID]). It wraps
	// ErrStaleToken, so errors.Is(err, ErrStaleToken) holds for it too; test
	// for it first to tell an operator that tokens repeat.
	ErrTokenReused = fmt.Errorf("%w: token reused by another holder", ErrStaleToken)
	// ErrInvalidToken is returned by the guards for a term they cannot
	// accept: a negative token, or no holder identity; for a shard's term
	// also no group or a negative shard.
	ErrInvalidToken = errors.New("fence: invalid token")
	// ErrBadResponse wraps answers from the sidecar that this client cannot
	// use: an unexpected status, a body that is not the documented JSON, a
	// malformed event stream.
	ErrBadResponse = errors.New("fence: unusable answer from the sidecar")
	// ErrDisconnected is the error of the state [Client.Watch] delivers when
	// its stream to the sidecar ends, and the cause of a Term ended that way.
	ErrDisconnected = errors.New("fence: lost the stream from the sidecar")
	// ErrLeadershipLost is the cause of a Term ended because the sidecar
	// reported that this replica no longer leads, or leads in another term.
	ErrLeadershipLost = errors.New("fence: leadership lost")
	// ErrLeadershipExpired is the cause of a Term whose ValidUntil passed
	// without a renewal.
	ErrLeadershipExpired = errors.New("fence: leadership expired without renewal")
	// ErrTokenRegressed reports that the sidecar leads in a term that does
	// not follow the highest this Client has delivered: a lower token, or
	// the same token with another identity. Only a replaced or reset store
	// hands out such a term, and this Client will not lead in it; see
	// [Client.WaitForLeadership] for what each method then does.
	ErrTokenRegressed = errors.New("fence: token regressed")
	// ErrTermClosed is the cause of a Term ended by [Term.Close].
	ErrTermClosed = errors.New("fence: term closed")
)
