package backendtest

import (
	"math"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// testHandoffMarker writes the three markers of a hand-off in turn, each
// read back by another handle, then a record without one: every write sets
// the marker it carries or clears it, never keeps an earlier one.
func testHandoffMarker(t *testing.T, open Opener) {
	writer, reader := open(t, "handoff"), open(t, "handoff")
	const leader, target = "pod-a_0b1e2d3c-4f5a-6b7c-8d9e-0f1a2b3c4d5e", "pod-b_9f8e7d6c-5b4a-3c2d-1e0f-a9b8c7d6e5f4"
	offer := SampleRecord(leader, 41)
	offer.Handoff = backend.Handoff{Phase: backend.HandoffOffer, From: leader, To: "pod-b", Token: 41}
	v := mustCreate(t, writer, offer)
	got, _ := mustGet(t, reader)
	AssertRecordEqual(t, got, offer)

	accept := offer
	accept.Handoff = backend.Handoff{Phase: backend.HandoffAccept, From: leader, To: target, Token: 41}
	transfer := SampleRecord(target, 42)
	transfer.Handoff = backend.Handoff{Phase: backend.HandoffTransfer, From: leader, To: target, Token: 42}
	anyone := SampleRecord(leader, math.MaxInt32)
	anyone.Handoff = backend.Handoff{Phase: backend.HandoffOffer, From: leader, Token: math.MaxInt32, Revision: "7d9f5c8b4"}
	reserved := SampleRecord("", 43)
	reserved.Handoff = backend.Handoff{Phase: backend.HandoffReserve, From: leader, To: "pod-a", Token: 43, Revision: "7d9f5c8b4", Wait: 12345 * time.Millisecond}
	for _, next := range []backend.Record{accept, transfer, SampleRecord(target, 42), anyone, SampleRecord(leader, 43), reserved} {
		var err error
		if v, err = writer.Update(ctxFor(t), v, next); err != nil {
			t.Fatalf("Update to %+v: %v", next, err)
		}
		got, gotV := mustGet(t, reader)
		AssertRecordEqual(t, got, next)
		if gotV != v {
			t.Fatalf("Get version %q, want %q", gotV, v)
		}
	}
}

// testRejectsMalformedHandoff: a marker the election never writes is
// refused before anything is stored.
func testRejectsMalformedHandoff(t *testing.T, open Opener) {
	b, fresh := open(t, "handoff-malformed"), open(t, "handoff-malformed-new")
	v := mustCreate(t, b, SampleRecord("a", 1))
	for name, h := range map[string]backend.Handoff{
		"unknown phase":   {Phase: "steal", From: "a", Token: 1},
		"no phase":        {From: "a", Token: 1},
		"no leader":       {Phase: backend.HandoffOffer, Token: 1},
		"token too large": {Phase: backend.HandoffTransfer, From: "a", To: "b", Token: math.MaxInt32 + 1},
		"negative token":  {Phase: backend.HandoffOffer, From: "a", Token: -1},
		"an offer waits":  {Phase: backend.HandoffOffer, From: "a", Token: 1, Wait: time.Second},
		"reserve no wait": {Phase: backend.HandoffReserve, From: "a", Token: 1},
		"reserve held":    {Phase: backend.HandoffReserve, From: "a", Token: 1, Wait: time.Second},
	} {
		rec := SampleRecord("a", 1)
		rec.Handoff = h
		if _, err := b.Update(ctxFor(t), v, rec); err == nil {
			t.Fatalf("%s: Update stored the marker %+v", name, h)
		}
		if _, err := fresh.Create(ctxFor(t), rec); err == nil {
			t.Fatalf("%s: Create stored the marker %+v", name, h)
		}
	}
	got, _ := mustGet(t, b)
	AssertRecordEqual(t, got, SampleRecord("a", 1))
	_, _, err := fresh.Get(ctxFor(t))
	wantErr(t, "Get after refused Creates", err, backend.ErrNotFound)
}
