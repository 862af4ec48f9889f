package backendtest

import (
	"slices"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// RunList checks a backend that is a backend.Lister, on a store (or
// namespace) of its own: List through any handle returns exactly the
// records whose election name begins with the prefix (one that only
// shares a shorter start excluded), sorted by name, each with the record
// and version Get returns; a prefix nothing begins with lists nothing.
// Every name is a valid Lease name.
func RunList(t *testing.T, open Opener) {
	names := []string{"g-member-b", "g-member-a", "g-member-0.x", "g-shard-0", "g-membe", "g-member", "h-member-a"}
	want := map[string]backend.Version{}
	var handle backend.Backend
	for i, name := range names {
		b := open(t, name)
		handle = b
		want[name] = mustCreate(t, b, SampleRecord(name, int64(i)))
	}
	lister, ok := handle.(backend.Lister)
	if !ok {
		t.Fatalf("%T is not a backend.Lister", handle)
	}
	got, err := lister.List(t.Context(), "g-member-")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var gotNames []string
	for _, l := range got {
		gotNames = append(gotNames, l.Name)
		if l.Version != want[l.Name] || l.Record.HolderIdentity != l.Name {
			t.Errorf("listed %q at version %s holding %q, want version %s holding %q",
				l.Name, l.Version, l.Record.HolderIdentity, want[l.Name], l.Name)
		}
	}
	wantNames := []string{"g-member-0.x", "g-member-a", "g-member-b"}
	if !slices.Equal(gotNames, wantNames) {
		t.Errorf("List(%q) = %q, want %q", "g-member-", gotNames, wantNames)
	}
	none, err := lister.List(t.Context(), "nothing-")
	if err != nil || len(none) != 0 {
		t.Errorf("List(%q) = %v, %v; want nothing", "nothing-", none, err)
	}
}
