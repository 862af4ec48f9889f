package memory_test

import (
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	store := memory.NewStore()
	backendtest.Run(t, func(t *testing.T, name string) backend.Backend {
		return store.Open(name)
	})
}

// TestDeletedRecordWasCreated checks that a deleted record is reported as
// missing, never as one that was never created: its holder may still run.
func TestDeletedRecordWasCreated(t *testing.T) {
	store := memory.NewStore()
	b := store.Open("deleted")
	if _, err := b.Create(t.Context(), backendtest.SampleRecord("a", 3)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	store.Delete("deleted")
	_, _, err := b.Get(t.Context())
	if !errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrNeverCreated) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound without ErrNeverCreated", err)
	}
}

// TestSnapshotOfADeletedRecord: once the record is deleted, the snapshot
// is not ok, as the Lease backend's is not after its watch saw the
// deletion; a new record shows again.
func TestSnapshotOfADeletedRecord(t *testing.T) {
	store := memory.NewStore()
	b := store.Open("deleted")
	b.Watch(t.Context())
	v, err := b.Create(t.Context(), backendtest.SampleRecord("a", 3))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, got, ok := b.Snapshot(); !ok || got != v {
		t.Fatalf("snapshot at %q (ok %v), want %q", got, ok, v)
	}
	store.Delete("deleted")
	if _, got, ok := b.Snapshot(); ok {
		t.Fatalf("a snapshot at %q after the record was deleted", got)
	}
	v, err = b.Create(t.Context(), backendtest.SampleRecord("b", 4))
	if err != nil {
		t.Fatalf("Create after Delete: %v", err)
	}
	if rec, got, ok := b.Snapshot(); !ok || got != v || rec.Transitions != 4 {
		t.Fatalf("snapshot at %q (ok %v, token %d), want %q with token 4", got, ok, rec.Transitions, v)
	}
}

func TestList(t *testing.T) {
	store := memory.NewStore()
	backendtest.RunList(t, func(t *testing.T, name string) backend.Backend { return store.Open(name) })
}
