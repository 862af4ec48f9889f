// Package backend defines the store an election runs on: one record per
// election, read and written with explicit compare-and-swap.
//
// A Backend only stores a Record; it never decides who leads. That decision
// lives in package election and exists once, whatever the store.
//
// Guarantees every implementation gives (checked by package backendtest):
//
//   - Get returns the stored record and its opaque Version, or ErrNotFound
//     (wrapping ErrNeverCreated too when the store proves no record of the
//     election ever existed in it).
//   - Create stores a record where none exists, or fails with ErrAlreadyExists.
//   - Update stores a record only if the stored version is still the version
//     passed in; otherwise it fails with ErrConflict (or ErrNotFound when the
//     record is gone). Of many writers racing from one version, exactly one
//     wins. The precondition is always an argument, never state cached by an
//     earlier Get.
//   - Watch signals, soon after another writer changed the record, that a
//     fresh Get is worth doing. Signals may be coalesced or spurious, never
//     carry data, and a caller must still poll as a fallback.
//   - Errors other than the sentinels are wrapped with context; no method
//     panics on bad stored data.
package backend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Sentinel errors. Implementations wrap them, so compare with errors.Is.
var (
	// ErrNotFound means no record exists for the election.
	ErrNotFound = errors.New("record not found")
	// ErrAlreadyExists means Create found a record already stored.
	ErrAlreadyExists = errors.New("record already exists")
	// ErrConflict means Update's precondition failed: another writer
	// changed the record since the version the caller read.
	ErrConflict = errors.New("record changed since it was read (version conflict)")
	// ErrStoreLost means the store the backend opened is gone or was
	// replaced (a SQLite file deleted, or another file renamed over it).
	// Candidates that start now use the new store and cannot see this
	// one's record, so a candidate must stop claiming at once and start
	// again on the new store. Every later call returns it too.
	ErrStoreLost = errors.New("store lost: it was deleted or replaced since it was opened")
	// ErrNeverCreated may be wrapped, together with ErrNotFound, by the Get
	// of a backend that is also a FirstCreator, when no record of this
	// election was ever created in its store: a hint that CreateFirst may
	// succeed. A store that cannot tell a record never created from one
	// deleted (a Lease) returns ErrNotFound alone.
	ErrNeverCreated = errors.New("no record of this election was ever created in this store")
)

// LossNotifier is implemented by backends whose store can be deleted or
// replaced under them. Lost returns a channel that is closed as soon as
// the backend notices the loss (at the latest on the next Get, Create or
// Update, which then fail with ErrStoreLost). It is never closed for any
// other reason, Close included.
type LossNotifier interface {
	Lost() <-chan struct{}
}

// FirstCreator is implemented by backends whose store keeps a trace of
// every record it ever held, so that a record never created can be told
// from one deleted (SQLite's version counter). An absence has no version,
// so only such a store lets a candidate that finds no record lead at once:
// success proves that no holder of an earlier record can exist.
type FirstCreator interface {
	// CreateFirst stores rec, as Create does, only if no record of this
	// election was ever created in the store, judged in the same atomic
	// step as the write; otherwise it fails with an error wrapping
	// ErrAlreadyExists.
	CreateFirst(ctx context.Context, rec Record) (Version, error)
}

// Lister is implemented by backends whose store holds the records of
// many elections and can list them by name: a shard group finds its
// members' records (named <group>-member-<identity>) this way, whose
// names it cannot know in advance.
type Lister interface {
	// List returns the record and version of every election in the store
	// whose name begins with prefix, sorted by name. Bad stored data reads
	// as Get reads it.
	List(ctx context.Context, prefix string) ([]Listed, error)
}

// Listed is one election's record as List found it.
type Listed struct {
	Name    string
	Record  Record
	Version Version
}

// Version identifies one stored state of a record. It is opaque: callers
// only hand it back to Update. Every successful write yields a new Version.
type Version string

// Record is what the election stores. Its fields follow client-go's
// LeaderElectionRecord so that the Lease backend maps it onto LeaseSpec the
// way client-go does.
type Record struct {
	// HolderIdentity is the identity of the current leader; empty when the
	// lease was released.
	HolderIdentity string
	// LeaseDurationSeconds is how long a candidate must see the record
	// unchanged before it may take it over. Whole seconds, as in a Lease.
	LeaseDurationSeconds int32
	// AcquireTime is when the current holder acquired the lease.
	AcquireTime time.Time
	// RenewTime is when the current holder last renewed it. Informational:
	// expiry is judged from local observation, never from this timestamp.
	RenewTime time.Time
	// Transitions counts changes of holder. It is the fencing token.
	// Every backend keeps values from 0 to math.MaxInt32 (a Lease stores an
	// int32) and rejects a larger one with an error.
	Transitions int64
	// Handoff marks a planned hand-off in progress; zero when none. Not
	// part of client-go's record: the Lease backend keeps it in an
	// annotation, which client-go's writes leave as they find it.
	Handoff Handoff
	// Group marks a record of a shard group with the shard count of the
	// replica that wrote it; zero for none (GroupMark). Kept like Handoff:
	// a column, an annotation.
	Group GroupMark
}

// Snapshotter is implemented by backends whose Watch keeps the latest
// record it has seen in memory. A standby reads it after a change signal
// instead of sending a Get, so an idle standby costs the store nothing.
//
// A snapshot may lag the store, never lead it: it is a state the store held
// at some point, delivered by the watch. Writes still go through Update
// with an explicit version, so a stale snapshot can only cost a conflict.
// Package backendtest checks this on every backend that implements it.
type Snapshotter interface {
	// Snapshot returns the record and version an active Watch saw last.
	// ok is false when no Watch has seen the record (none running, not yet
	// synced, or the record is absent); then the caller uses Get.
	Snapshot() (rec Record, version Version, ok bool)
}

// MaxTransitions is the largest token every backend can store.
const MaxTransitions = math.MaxInt32

// CheckRecord returns an error if rec holds a value no backend can store,
// a hand-off marker the election never writes, or a group mark no group
// writes.
func CheckRecord(rec Record) error {
	if rec.Transitions < 0 || rec.Transitions > MaxTransitions {
		return fmt.Errorf("transitions %d out of range [0, %d]", rec.Transitions, MaxTransitions)
	}
	if err := rec.Group.check(); err != nil {
		return err
	}
	if rec.Handoff.Phase == HandoffReserve && rec.HolderIdentity != "" {
		return fmt.Errorf("a reserve marker on a record held by %q: it is carried by a release only", rec.HolderIdentity)
	}
	return rec.Handoff.check()
}

// TimePrecision is the precision every backend keeps for AcquireTime and
// RenewTime (a Lease stores MicroTime).
const TimePrecision = time.Microsecond

// Backend stores the record of one election.
type Backend interface {
	// Get returns the record and its version, or an error wrapping
	// ErrNotFound (and also ErrNeverCreated when the store can prove no
	// record of the election ever existed in it).
	Get(ctx context.Context) (Record, Version, error)
	// Create stores rec if no record exists, or returns an error wrapping
	// ErrAlreadyExists.
	Create(ctx context.Context, rec Record) (Version, error)
	// Update replaces the record if its stored version is still prev, or
	// returns an error wrapping ErrConflict (or ErrNotFound if it is gone).
	Update(ctx context.Context, prev Version, rec Record) (Version, error)
	// Watch returns a channel that receives a value soon after the record
	// changes. The channel has a buffer of one, signals are coalesced, and it
	// is closed when ctx is done.
	Watch(ctx context.Context) <-chan struct{}
	// Describe names the store and election for logs and the HTTP API,
	// e.g. "sqlite:/var/lib/app/leader.db#billing".
	Describe() string
	// Close releases the backend's resources.
	Close() error
}
