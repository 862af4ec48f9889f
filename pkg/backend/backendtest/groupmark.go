package backendtest

import (
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// testGroupMark writes records with and without a shard-group mark, each
// read back by another handle, and one with a mark no group writes: every
// write sets the mark it carries or clears it, never keeps an earlier
// one, and a malformed mark is refused before anything is stored.
func testGroupMark(t *testing.T, open Opener) {
	writer, reader := open(t, "group-mark"), open(t, "group-mark")
	member := SampleRecord("pod-a_1", 3)
	member.Group = backend.GroupMark{Shards: 4}
	v := mustCreate(t, writer, member)
	got, _ := mustGet(t, reader)
	AssertRecordEqual(t, got, member)
	yielded := member
	yielded.Group = backend.GroupMark{Shards: 2, Yielded: true}
	leaving := member
	leaving.Group = backend.GroupMark{Shards: 4, Leaving: true}
	for _, next := range []backend.Record{yielded, leaving, SampleRecord("pod-a_1", 3), member} {
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
	for name, m := range map[string]backend.GroupMark{
		"negative count":          {Shards: -1},
		"yielded without a count": {Yielded: true},
		"leaving without a count": {Leaving: true},
	} {
		rec := member
		rec.Group = m
		if _, err := writer.Update(ctxFor(t), v, rec); err == nil {
			t.Fatalf("%s: Update stored the mark %+v", name, m)
		}
	}
	got, _ = mustGet(t, reader)
	AssertRecordEqual(t, got, member)
}
