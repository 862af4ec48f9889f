package backendtest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// The cases of backend.Snapshotter, run on a backend that implements it.
// A snapshot is what a Watch of the handle saw last: none before a Watch
// has run; then the record as the store held it, soon after each change,
// another writer's or the handle's own (an election's leader relies on
// seeing its own write to send nothing more); a state the store held, at a
// version Update accepts, never one it has not held yet, and never an older
// one after a newer.

// snapshotter is the handle b as a backend.Snapshotter; it fails t if b is
// none.
func snapshotter(t *testing.T, b backend.Backend) backend.Snapshotter {
	t.Helper()
	s, ok := b.(backend.Snapshotter)
	if !ok {
		t.Fatalf("%s is not a backend.Snapshotter", b.Describe())
	}
	return s
}

// awaitSnapshot waits, following the change signals of a Watch of s, until
// s's snapshot is at version want, and returns its record.
func awaitSnapshot(t *testing.T, s backend.Snapshotter, changes <-chan struct{}, want backend.Version) backend.Record {
	t.Helper()
	deadline := time.After(signalTimeout)
	for {
		rec, v, ok := s.Snapshot()
		if ok && v == want {
			return rec
		}
		select {
		case _, open := <-changes:
			if !open {
				t.Fatal("watch channel closed while its context is live")
			}
		case <-deadline:
			t.Fatalf("snapshot at %q (ok %v) %v after the write, want version %q", v, ok, signalTimeout, want)
		}
	}
}

func testSnapshotNeedsAWatch(t *testing.T, open Opener) {
	b := open(t, "snapshot-no-watch")
	mustCreate(t, b, SampleRecord("a", 1))
	if rec, v, ok := snapshotter(t, b).Snapshot(); ok {
		t.Fatalf("a snapshot at %q (%+v) from a handle that never watched", v, rec)
	}
}

func testSnapshotFollowsOtherWriter(t *testing.T, open Opener) {
	watcher, writer := open(t, "snapshot-other"), open(t, "snapshot-other")
	s := snapshotter(t, watcher)
	changes := watcher.Watch(ctxFor(t))
	if _, v, ok := s.Snapshot(); ok {
		t.Fatalf("a snapshot at %q of a record that does not exist", v)
	}

	version := mustCreate(t, writer, SampleRecord("a", 1))
	AssertRecordEqual(t, awaitSnapshot(t, s, changes, version), SampleRecord("a", 1))
	version, err := writer.Update(ctxFor(t), version, SampleRecord("b", 2))
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	AssertRecordEqual(t, awaitSnapshot(t, s, changes, version), SampleRecord("b", 2))

	// The snapshot's version is the store's: an Update from it wins.
	if _, err := watcher.Update(ctxFor(t), version, SampleRecord("c", 3)); err != nil {
		t.Fatalf("Update from the snapshot's version %q: %v", version, err)
	}
}

func testSnapshotOfOwnWrites(t *testing.T, open Opener) {
	b := open(t, "snapshot-own")
	s := snapshotter(t, b)
	changes := b.Watch(ctxFor(t))
	version := mustCreate(t, b, SampleRecord("a", 1))
	AssertRecordEqual(t, awaitSnapshot(t, s, changes, version), SampleRecord("a", 1))
	for token := int64(2); token <= 4; token++ {
		v, err := b.Update(ctxFor(t), version, SampleRecord("a", token))
		if err != nil {
			t.Fatalf("Update %d: %v", token, err)
		}
		version = v
		AssertRecordEqual(t, awaitSnapshot(t, s, changes, version), SampleRecord("a", token))
	}
}

// testSnapshotNeverLeads samples a watcher's snapshot after every signal
// while another handle writes a run of records: each sample is a state the
// store held, at its version, none is older than the one before, and the
// last write is sampled soon after it.
func testSnapshotNeverLeads(t *testing.T, open Opener) {
	const writes = 20
	watcher, writer := open(t, "snapshot-order"), open(t, "snapshot-order")
	s := snapshotter(t, watcher)
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	changes := watcher.Watch(ctx)

	type sample struct {
		rec backend.Record
		v   backend.Version
	}
	var (
		mu      sync.Mutex
		samples []sample
	)
	sampled := func() []sample {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(samples)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range changes {
			if rec, v, ok := s.Snapshot(); ok {
				mu.Lock()
				samples = append(samples, sample{rec, v})
				mu.Unlock()
			}
		}
	}()

	versions := []backend.Version{mustCreate(t, writer, SampleRecord("w", 1))}
	for token := int64(2); token <= writes; token++ {
		v, err := writer.Update(ctxFor(t), versions[len(versions)-1], SampleRecord("w", token))
		if err != nil {
			t.Fatalf("Update %d: %v", token, err)
		}
		versions = append(versions, v)
	}
	final := versions[len(versions)-1]
	for deadline := time.Now().Add(signalTimeout); ; time.Sleep(10 * time.Millisecond) {
		if got := sampled(); len(got) > 0 && got[len(got)-1].v == final {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot of the last write (version %q) within %v; sampled %d", final, signalTimeout, len(sampled()))
		}
	}
	cancel()
	<-done

	last := -1
	for _, got := range sampled() {
		i := slices.Index(versions, got.v)
		if i < 0 {
			t.Fatalf("a snapshot at version %q, which no write returned (writes: %q)", got.v, versions)
		}
		if i < last {
			t.Fatalf("a snapshot of write %d after one of write %d", i+1, last+1)
		}
		last = i
		AssertRecordEqual(t, got.rec, SampleRecord("w", int64(i+1)))
	}
}
