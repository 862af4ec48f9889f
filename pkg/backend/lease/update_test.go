package lease

import (
	"errors"
	"maps"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// decoratedLease is a Lease as a Helm chart and an operator might leave it.
func decoratedLease(ns, name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels:      map[string]string{"app.kubernetes.io/name": "billing"},
			Annotations: map[string]string{"example.com/owner": "team-billing"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: "billing", UID: "6a1f2b3c-0000-4000-8000-000000000001",
			}},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:  ptr.To("old"),
			Strategy:        ptr.To(coordinationv1.OldestEmulationVersion),
			PreferredHolder: ptr.To("billing-0"),
		},
	}
}

// assertDecorationsKept fails unless got kept want's labels, annotations,
// owner references, strategy and preferred holder.
func assertDecorationsKept(t *testing.T, got, want *coordinationv1.Lease) {
	t.Helper()
	if !maps.Equal(got.Labels, want.Labels) || !maps.Equal(got.Annotations, want.Annotations) ||
		len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != want.OwnerReferences[0].UID {
		t.Fatalf("metadata not kept:\n got  %v %v %v\n want %v %v %v", got.Labels, got.Annotations, got.OwnerReferences,
			want.Labels, want.Annotations, want.OwnerReferences)
	}
	if ptr.Deref(got.Spec.Strategy, "") != ptr.Deref(want.Spec.Strategy, "") ||
		ptr.Deref(got.Spec.PreferredHolder, "") != ptr.Deref(want.Spec.PreferredHolder, "") {
		t.Fatalf("spec.strategy/preferredHolder not kept: got %v/%v, want %v/%v",
			ptr.Deref(got.Spec.Strategy, ""), ptr.Deref(got.Spec.PreferredHolder, ""),
			ptr.Deref(want.Spec.Strategy, ""), ptr.Deref(want.Spec.PreferredHolder, ""))
	}
}

// TestUpdateKeepsMetadata: an Update from a version the Backend read
// itself, and one from a version it never saw, both keep what the record
// does not cover.
func TestUpdateKeepsMetadata(t *testing.T) {
	ns, name := newNamespace(t), "decorated"
	created, err := admin.CoordinationV1().Leases(ns).Create(ctxFor(t), decoratedLease(ns, name), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the Lease: %v", err)
	}
	if created.Spec.Strategy == nil {
		t.Fatal("the API server dropped spec.strategy: is the CoordinatedLeaderElection feature gate on?")
	}
	client := newClient(t)
	reader := newBackend(t, client, ns, name)
	_, v, err := reader.Get(ctxFor(t))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if v, err = reader.Update(ctxFor(t), v, backendtest.SampleRecord("reader", 1)); err != nil {
		t.Fatalf("Update from a version read by the same Backend: %v", err)
	}
	stranger := newBackend(t, client, ns, name) // has never read the Lease
	if _, err = stranger.Update(ctxFor(t), v, backendtest.SampleRecord("stranger", 2)); err != nil {
		t.Fatalf("Update from a version the Backend never read: %v", err)
	}

	got, err := admin.CoordinationV1().Leases(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	assertDecorationsKept(t, got, created)
	rec, _, _ := reader.Get(ctxFor(t))
	backendtest.AssertRecordEqual(t, rec, backendtest.SampleRecord("stranger", 2))
}

// TestUpdateDoesNotRecreateDeletedLease: Leases allow create-on-update, so
// a PUT carrying only a resourceVersion would bring a deleted Lease back.
// The backend's Update must fail instead, whether or not it remembers the
// Lease.
func TestUpdateDoesNotRecreateDeletedLease(t *testing.T) {
	ns, name := newNamespace(t), "deleted"
	leases := admin.CoordinationV1().Leases(ns)
	client := newClient(t)
	holder := newBackend(t, client, ns, name)
	v, err := holder.Create(ctxFor(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := leases.Delete(ctxFor(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}

	_, err = holder.Update(ctxFor(t), v, backendtest.SampleRecord("a", 1))
	if !errors.Is(err, backend.ErrConflict) && !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Update of a deleted Lease by the Backend that wrote it: got %v, want ErrConflict or ErrNotFound", err)
	}
	_, err = newBackend(t, client, ns, name).Update(ctxFor(t), v, backendtest.SampleRecord("b", 2))
	if !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Update of a deleted Lease by a fresh Backend: got %v, want ErrNotFound", err)
	}
	if _, err := leases.Get(ctxFor(t), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the deleted Lease is back (err %v)", err)
	}

	// The hazard is real: a plain PUT with a resourceVersion but no UID
	// brings the Lease back.
	bare := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: string(v)}}
	if _, err := leases.Update(ctxFor(t), bare, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("a PUT without UID on the deleted Lease failed (%v): the API server no longer creates on update", err)
	}
}

// TestUpdateEmptyVersion: an empty version is never sent, since a PUT
// without a resourceVersion would be unconditional.
func TestUpdateEmptyVersion(t *testing.T) {
	ns := newNamespace(t)
	b := newBackend(t, newClient(t), ns, "empty-version")
	if _, err := b.Create(ctxFor(t), backendtest.SampleRecord("a", 1)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	_, err := b.Update(ctxFor(t), "", backendtest.SampleRecord("b", 2))
	if !errors.Is(err, backend.ErrConflict) {
		t.Fatalf("Update from an empty version: got %v, want ErrConflict", err)
	}
	_, err = b.Update(ctxFor(t), "1", backendtest.SampleRecord("b", 2))
	if !errors.Is(err, backend.ErrConflict) || !strings.Contains(err.Error(), "stored") {
		t.Fatalf("Update from a version never stored: got %v, want ErrConflict naming the stored version", err)
	}
	rec, _, _ := b.Get(ctxFor(t))
	backendtest.AssertRecordEqual(t, rec, backendtest.SampleRecord("a", 1))
}
