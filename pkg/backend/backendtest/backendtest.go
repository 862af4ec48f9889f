// Package backendtest is the conformance suite every backend.Backend runs.
//
// A backend's own tests call Run with an Opener. The suite checks the
// contract of package backend: create-if-absent, compare-and-swap on the
// version, exactly one winner among racing writers, the change signal after
// another writer's update, and records that round-trip every field, the
// hand-off marker included (set, changed and cleared by later writes), and
// ErrNeverCreated from Get of an election that never had a record (unless
// the backend declares with CannotProveNeverCreated that it cannot tell).
// On a backend that is a backend.Snapshotter it checks the snapshot too:
// none before a Watch, then soon after every write, its own included, a
// state the store held at a version Update accepts, never ahead of the
// store and never going back.
package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Opener opens a new handle on the election called name. Handles opened
// with the same name within one Run share one stored record, as separate
// processes sharing a store would. The Opener registers its own cleanup.
type Opener func(t *testing.T, name string) backend.Backend

// Racers is how many handles race one Update in the race test.
const Racers = 16

// signalTimeout bounds how long the suite waits for a change signal. It is
// a failure bound, not a speed target.
const signalTimeout = 10 * time.Second

// Option changes what the suite expects of a backend.
type Option func(*expectations)

type expectations struct {
	provesNeverCreated bool
}

// CannotProveNeverCreated declares a backend that cannot prove that no
// record of an election ever existed (a Lease keeps nothing once deleted):
// the suite then accepts ErrNotFound alone from Get of a record that was
// never created. Every other backend must wrap backend.ErrNeverCreated too.
func CannotProveNeverCreated() Option {
	return func(e *expectations) { e.provesNeverCreated = false }
}

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, open Opener, opts ...Option) {
	want := expectations{provesNeverCreated: true}
	for _, opt := range opts {
		opt(&want)
	}
	t.Run("GetMissing", func(t *testing.T) { testGetMissing(t, open) })
	t.Run("GetNeverCreated", func(t *testing.T) { testGetNeverCreated(t, open, want) })
	t.Run("CreateFirst", func(t *testing.T) { testCreateFirst(t, open, want) })
	t.Run("CreateIfAbsent", func(t *testing.T) { testCreateIfAbsent(t, open) })
	t.Run("UpdateStaleConflicts", func(t *testing.T) { testUpdateStale(t, open) })
	t.Run("UpdateMissing", func(t *testing.T) { testUpdateMissing(t, open) })
	t.Run("RacingUpdatesOneWinner", func(t *testing.T) { testRacingUpdates(t, open) })
	t.Run("RacingCreatesOneWinner", func(t *testing.T) { testRacingCreates(t, open) })
	t.Run("WatchSignalsOtherWriter", func(t *testing.T) { testWatch(t, open) })
	t.Run("WatchClosesOnCancel", func(t *testing.T) { testWatchCloses(t, open) })
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, open) })
	t.Run("HandoffMarker", func(t *testing.T) { testHandoffMarker(t, open) })
	t.Run("RejectsMalformedHandoff", func(t *testing.T) { testRejectsMalformedHandoff(t, open) })
	t.Run("GroupMark", func(t *testing.T) { testGroupMark(t, open) })
	t.Run("RejectsTokenBeyondInt32", func(t *testing.T) { testRejectsTokenBeyondInt32(t, open) })
	t.Run("ElectionsAreSeparate", func(t *testing.T) { testSeparate(t, open) })
	if _, ok := open(t, "snapshot-probe").(backend.Snapshotter); ok {
		t.Run("SnapshotNeedsAWatch", func(t *testing.T) { testSnapshotNeedsAWatch(t, open) })
		t.Run("SnapshotFollowsOtherWriter", func(t *testing.T) { testSnapshotFollowsOtherWriter(t, open) })
		t.Run("SnapshotOfOwnWrites", func(t *testing.T) { testSnapshotOfOwnWrites(t, open) })
		t.Run("SnapshotNeverLeads", func(t *testing.T) { testSnapshotNeverLeads(t, open) })
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// SampleRecord returns a record with every field set, times at the
// precision backends keep.
func SampleRecord(holder string, token int64) backend.Record {
	acquire := time.Date(2026, 3, 14, 15, 9, 26, 535897000, time.UTC)
	return backend.Record{
		HolderIdentity:       holder,
		LeaseDurationSeconds: 15,
		AcquireTime:          acquire,
		RenewTime:            acquire.Add(93*time.Second + 238*time.Microsecond),
		Transitions:          token,
	}
}

func mustCreate(t *testing.T, b backend.Backend, rec backend.Record) backend.Version {
	t.Helper()
	v, err := b.Create(ctxFor(t), rec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if v == "" {
		t.Fatal("Create returned an empty version")
	}
	return v
}

func mustGet(t *testing.T, b backend.Backend) (backend.Record, backend.Version) {
	t.Helper()
	rec, v, err := b.Get(ctxFor(t))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return rec, v
}

func wantErr(t *testing.T, op string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want one wrapping %q", op, err, want)
	}
}

// AssertRecordEqual fails t unless got and want agree on every field
// (times compared as instants).
func AssertRecordEqual(t *testing.T, got, want backend.Record) {
	t.Helper()
	if got.HolderIdentity != want.HolderIdentity ||
		got.LeaseDurationSeconds != want.LeaseDurationSeconds ||
		!got.AcquireTime.Equal(want.AcquireTime) ||
		!got.RenewTime.Equal(want.RenewTime) ||
		got.Transitions != want.Transitions ||
		got.Handoff != want.Handoff ||
		got.Group != want.Group {
		t.Fatalf("record mismatch:\n got  %+v\n want %+v", got, want)
	}
}
