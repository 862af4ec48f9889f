package lease

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// clientGoLock is client-go's own LeaseLock on the Lease ns/name.
func clientGoLock(ns, name string) *resourcelock.LeaseLock {
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: name},
		Client:     admin.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "client-go"},
	}
}

// toClientGo is rec as client-go's LeaderElectionRecord.
func toClientGo(rec backend.Record) resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{
		HolderIdentity:       rec.HolderIdentity,
		LeaseDurationSeconds: int(rec.LeaseDurationSeconds),
		AcquireTime:          metav1.Time{Time: rec.AcquireTime},
		RenewTime:            metav1.Time{Time: rec.RenewTime},
		LeaderTransitions:    int(rec.Transitions),
	}
}

// assertClientGoRecord fails unless client-go's record got says what want does.
func assertClientGoRecord(t *testing.T, got *resourcelock.LeaderElectionRecord, want backend.Record) {
	t.Helper()
	w := toClientGo(want)
	if got.HolderIdentity != w.HolderIdentity || got.LeaseDurationSeconds != w.LeaseDurationSeconds ||
		!got.AcquireTime.Equal(&w.AcquireTime) || !got.RenewTime.Equal(&w.RenewTime) ||
		got.LeaderTransitions != w.LeaderTransitions || got.Strategy != "" || got.PreferredHolder != "" {
		t.Fatalf("client-go read\n %+v\nwant\n %+v", *got, w)
	}
}

// TestClientGoInterop writes with client-go's LeaseLock and reads with the
// backend, and the other way round: both map the record identically,
// including zero times.
func TestClientGoInterop(t *testing.T) {
	ns, name := newNamespace(t), "interop"
	lock := clientGoLock(ns, name)
	b := newBackend(t, newClient(t), ns, name)
	released := backend.Record{LeaseDurationSeconds: 1, Transitions: 8}

	first := backendtest.SampleRecord("client-go-holder", 7)
	if err := lock.Create(ctxFor(t), toClientGo(first)); err != nil {
		t.Fatalf("LeaseLock.Create: %v", err)
	}
	got, v, err := b.Get(ctxFor(t))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	backendtest.AssertRecordEqual(t, got, first)

	for i, rec := range []backend.Record{backendtest.SampleRecord("sidecar-holder", 8), released} {
		if v, err = b.Update(ctxFor(t), v, rec); err != nil {
			t.Fatalf("write %d: Update: %v", i, err)
		}
		cg, _, err := lock.Get(ctxFor(t))
		if err != nil {
			t.Fatalf("write %d: LeaseLock.Get: %v", i, err)
		}
		assertClientGoRecord(t, cg, rec)
	}

	// client-go writes a released record with zero times: they read back
	// as zero, not as some instant near year 1 or 1970.
	if err := lock.Update(ctxFor(t), toClientGo(released)); err != nil {
		t.Fatalf("LeaseLock.Update: %v", err)
	}
	got, _, err = b.Get(ctxFor(t))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	backendtest.AssertRecordEqual(t, got, released)
	if !got.AcquireTime.IsZero() || !got.RenewTime.IsZero() {
		t.Fatalf("zero times written by client-go read back as %v and %v", got.AcquireTime, got.RenewTime)
	}
}

// TestClientGoSharesCompareAndSwap shows both sides condition their writes
// on the same resourceVersion: each one's write makes the other's stale
// write fail.
func TestClientGoSharesCompareAndSwap(t *testing.T) {
	ns, name := newNamespace(t), "cas"
	lock := clientGoLock(ns, name)
	b := newBackend(t, newClient(t), ns, name)
	v, err := b.Create(ctxFor(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}

	// client-go read version v; the backend writes first.
	if _, _, err := lock.Get(ctxFor(t)); err != nil {
		t.Fatalf("LeaseLock.Get: %v", err)
	}
	if v, err = b.Update(ctxFor(t), v, backendtest.SampleRecord("b", 2)); err != nil {
		t.Fatalf("Update: %v", err)
	}
	err = lock.Update(ctxFor(t), toClientGo(backendtest.SampleRecord("client-go", 2)))
	if !apierrors.IsConflict(err) {
		t.Fatalf("client-go's update from a version the backend replaced: got %v, want a conflict", err)
	}

	// Both read the current version; client-go writes first.
	if _, _, err := lock.Get(ctxFor(t)); err != nil {
		t.Fatalf("LeaseLock.Get: %v", err)
	}
	if err := lock.Update(ctxFor(t), toClientGo(backendtest.SampleRecord("client-go", 3))); err != nil {
		t.Fatalf("LeaseLock.Update: %v", err)
	}
	_, err = b.Update(ctxFor(t), v, backendtest.SampleRecord("b", 3))
	if !errors.Is(err, backend.ErrConflict) {
		t.Fatalf("backend update from a version client-go replaced: got %v, want ErrConflict", err)
	}
	got, _, err := b.Get(ctxFor(t))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	backendtest.AssertRecordEqual(t, got, backendtest.SampleRecord("client-go", 3))
}
