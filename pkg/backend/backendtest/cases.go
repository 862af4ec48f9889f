package backendtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

func testGetMissing(t *testing.T, open Opener) {
	_, _, err := open(t, "get-missing").Get(ctxFor(t))
	wantErr(t, "Get of a missing record", err, backend.ErrNotFound)
}

// testGetNeverCreated checks ErrNeverCreated: reported with ErrNotFound for
// an election that never had a record (by a backend that can prove it),
// and never for one whose record exists, nor once another election of the
// same store has a record.
func testGetNeverCreated(t *testing.T, open Opener, want expectations) {
	a, b := open(t, "never-created-a"), open(t, "never-created-b")
	mustCreate(t, a, SampleRecord("a", 1))
	if _, _, err := a.Get(ctxFor(t)); err != nil {
		t.Fatalf("Get of a created record: %v", err)
	}
	_, _, err := b.Get(ctxFor(t))
	wantErr(t, "Get of a record never created", err, backend.ErrNotFound)
	if want.provesNeverCreated && !errors.Is(err, backend.ErrNeverCreated) {
		t.Fatalf("Get of a record never created: got %v, want one wrapping %q as well (or declare CannotProveNeverCreated)", err, backend.ErrNeverCreated)
	}
}

// testCreateFirst checks backend.FirstCreator: offered exactly by the
// backends that prove a record never created; of handles racing to create
// the first record exactly one wins, and once a record exists CreateFirst
// is refused as Create is.
func testCreateFirst(t *testing.T, open Opener, want expectations) {
	handles := make([]backend.FirstCreator, 4)
	for i := range handles {
		f, ok := open(t, "create-first").(backend.FirstCreator)
		if ok != want.provesNeverCreated {
			t.Fatalf("FirstCreator %v, want %v: CreateFirst is offered exactly by backends that prove a record never created", ok, want.provesNeverCreated)
		}
		if !ok {
			return
		}
		handles[i] = f
	}
	var wg sync.WaitGroup
	errs := make([]error, len(handles))
	for i, f := range handles {
		wg.Go(func() { _, errs[i] = f.CreateFirst(ctxFor(t), SampleRecord(fmt.Sprint("h", i), 1)) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, backend.ErrAlreadyExists):
			t.Fatalf("a CreateFirst that lost the race: %v, want ErrAlreadyExists", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d racing CreateFirst calls won, want exactly 1", won, len(handles))
	}
	_, err := handles[0].CreateFirst(ctxFor(t), SampleRecord("late", 1))
	wantErr(t, "CreateFirst once a record exists", err, backend.ErrAlreadyExists)
}

func testCreateIfAbsent(t *testing.T, open Opener) {
	a, b := open(t, "create"), open(t, "create")
	first := SampleRecord("a", 1)
	v := mustCreate(t, a, first)

	_, err := b.Create(ctxFor(t), SampleRecord("b", 7))
	wantErr(t, "second Create", err, backend.ErrAlreadyExists)

	got, gotV := mustGet(t, b)
	AssertRecordEqual(t, got, first)
	if gotV != v {
		t.Fatalf("Get version %q, want the created version %q", gotV, v)
	}
}

func testUpdateStale(t *testing.T, open Opener) {
	a, b := open(t, "stale"), open(t, "stale")
	v1 := mustCreate(t, a, SampleRecord("a", 1))

	second := SampleRecord("b", 2)
	v2, err := b.Update(ctxFor(t), v1, second)
	if err != nil {
		t.Fatalf("Update from the current version: %v", err)
	}
	if v2 == v1 {
		t.Fatalf("Update kept version %q; every write must yield a new one", v1)
	}

	_, err = a.Update(ctxFor(t), v1, SampleRecord("a", 3))
	wantErr(t, "Update from a stale version", err, backend.ErrConflict)

	got, gotV := mustGet(t, a)
	AssertRecordEqual(t, got, second)
	if gotV != v2 {
		t.Fatalf("Get version %q, want %q", gotV, v2)
	}
}

func testUpdateMissing(t *testing.T, open Opener) {
	other := open(t, "update-missing-other")
	v := mustCreate(t, other, SampleRecord("a", 1))
	_, err := open(t, "update-missing").Update(ctxFor(t), v, SampleRecord("a", 2))
	wantErr(t, "Update of a missing record", err, backend.ErrNotFound)
}

func testRacingUpdates(t *testing.T, open Opener) {
	handles := make([]backend.Backend, Racers)
	for i := range handles {
		handles[i] = open(t, "race")
	}
	version := mustCreate(t, handles[0], SampleRecord("start", 1))
	for round := range 5 {
		results := race(len(handles), func(i int) (backend.Version, error) {
			return handles[i].Update(ctxFor(t), version, SampleRecord(holderName(i), int64(round+2)))
		})
		winner := -1
		for i, r := range results {
			switch {
			case r.err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both won an Update from version %q", round, winner, i, version)
				}
				winner = i
			case !errors.Is(r.err, backend.ErrConflict):
				t.Fatalf("round %d: writer %d: got %v, want ErrConflict", round, i, r.err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
		got, v := mustGet(t, handles[0])
		if got.HolderIdentity != holderName(winner) || v != results[winner].version {
			t.Fatalf("round %d: stored %q at %q, want the winner %q at %q",
				round, got.HolderIdentity, v, holderName(winner), results[winner].version)
		}
		version = v
	}
}

func testRacingCreates(t *testing.T, open Opener) {
	handles := make([]backend.Backend, Racers)
	for i := range handles {
		handles[i] = open(t, "race-create")
	}
	results := race(len(handles), func(i int) (backend.Version, error) {
		return handles[i].Create(ctxFor(t), SampleRecord(holderName(i), 1))
	})
	wins := 0
	for i, r := range results {
		if r.err == nil {
			wins++
			continue
		}
		if !errors.Is(r.err, backend.ErrAlreadyExists) {
			t.Fatalf("creator %d: got %v, want ErrAlreadyExists", i, r.err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d creators won, want exactly 1", wins)
	}
}

type result struct {
	version backend.Version
	err     error
}

// race runs n calls of op as close to simultaneously as goroutines allow.
func race(n int, op func(i int) (backend.Version, error)) []result {
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			v, err := op(i)
			results[i] = result{v, err}
		})
	}
	close(start)
	wg.Wait()
	return results
}

func holderName(i int) string { return "writer-" + string(rune('a'+i)) }

func testWatch(t *testing.T, open Opener) {
	watcher, writer := open(t, "watch"), open(t, "watch")
	version := mustCreate(t, writer, SampleRecord("a", 1))
	changes := watcher.Watch(ctxFor(t))
	// Signals may be spurious, and one may already be pending, so only the
	// second and later rounds prove that a write produced a signal.
	for round := range 3 {
		v, err := writer.Update(ctxFor(t), version, SampleRecord("b", int64(round+2)))
		if err != nil {
			t.Fatalf("round %d: Update: %v", round, err)
		}
		version = v
		select {
		case _, ok := <-changes:
			if !ok {
				t.Fatalf("round %d: watch channel closed while its context is live", round)
			}
		case <-time.After(signalTimeout):
			t.Fatalf("round %d: no change signal within %v of another writer's update", round, signalTimeout)
		}
	}
}

func testWatchCloses(t *testing.T, open Opener) {
	ctx, cancel := context.WithCancel(ctxFor(t))
	changes := open(t, "watch-close").Watch(ctx)
	cancel()
	deadline := time.After(signalTimeout)
	for {
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("watch channel still open %v after its context was cancelled", signalTimeout)
		}
	}
}

func testRoundTrip(t *testing.T, open Opener) {
	b := open(t, "round-trip")
	local := time.FixedZone("UTC+5:30", 5*3600+1800)
	created := backend.Record{
		HolderIdentity:       "pod-7f9c_0b1e2d3c-4f5a-6b7c-8d9e-0f1a2b3c4d5e",
		LeaseDurationSeconds: 2147483647,
		AcquireTime:          time.Date(1999, 12, 31, 23, 59, 59, 999999000, local),
		RenewTime:            time.Date(2038, 1, 19, 3, 14, 8, 1000, time.UTC),
		Transitions:          math.MaxInt32,
	}
	v := mustCreate(t, b, created)
	got, _ := mustGet(t, b)
	AssertRecordEqual(t, got, created)

	// A released record: empty holder, zero times, token kept.
	released := backend.Record{LeaseDurationSeconds: 1, Transitions: math.MaxInt32}
	if _, err := b.Update(ctxFor(t), v, released); err != nil {
		t.Fatalf("Update: %v", err)
	}
	got, _ = mustGet(t, b)
	AssertRecordEqual(t, got, released)
	if !got.AcquireTime.IsZero() || !got.RenewTime.IsZero() {
		t.Fatalf("zero times came back as %v and %v", got.AcquireTime, got.RenewTime)
	}
}

func testRejectsTokenBeyondInt32(t *testing.T, open Opener) {
	b := open(t, "token-range")
	rec := SampleRecord("a", math.MaxInt32+1)
	if _, err := b.Create(ctxFor(t), rec); err == nil {
		t.Fatal("Create accepted a token above math.MaxInt32")
	}
	v := mustCreate(t, b, SampleRecord("a", 1))
	if _, err := b.Update(ctxFor(t), v, rec); err == nil || errors.Is(err, backend.ErrConflict) {
		t.Fatalf("Update with a token above math.MaxInt32: got %v, want a plain error", err)
	}
	got, _ := mustGet(t, b)
	AssertRecordEqual(t, got, SampleRecord("a", 1))
}

func testSeparate(t *testing.T, open Opener) {
	a, b := open(t, "separate-a"), open(t, "separate-b")
	mustCreate(t, a, SampleRecord("a", 1))
	_, _, err := b.Get(ctxFor(t))
	wantErr(t, "Get of another election's name", err, backend.ErrNotFound)
	mustCreate(t, b, SampleRecord("b", 9))
	got, _ := mustGet(t, a)
	AssertRecordEqual(t, got, SampleRecord("a", 1))
}
