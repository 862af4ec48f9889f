package lease

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// TestHandoffMarkerIsAnAnnotation: the marker is stored as the
// HandoffAnnotation next to the Lease's other annotations, which setting
// and clearing it keep; client-go's LeaseLock writes the spec and leaves
// the annotation as it finds it; and an annotation edited into nonsense
// reads as no marker.
func TestHandoffMarkerIsAnAnnotation(t *testing.T) {
	ns, name := newNamespace(t), "handoff-annotation"
	leases := admin.CoordinationV1().Leases(ns)
	if _, err := leases.Create(ctxFor(t), decoratedLease(ns, name), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Lease: %v", err)
	}
	b := newBackend(t, newClient(t), ns, name)
	_, v, err := b.Get(ctxFor(t))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}

	offer := backendtest.SampleRecord("a_1", 5)
	offer.Handoff = backend.Handoff{Phase: backend.HandoffOffer, From: "a_1", To: "b", Token: 5}
	if v, err = b.Update(ctxFor(t), v, offer); err != nil {
		t.Fatalf("Update with a marker: %v", err)
	}
	l, err := leases.Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"example.com/owner": "team-billing", HandoffAnnotation: `{"phase":"offer","from":"a_1","to":"b","token":5}`}
	if !maps.Equal(l.Annotations, want) {
		t.Fatalf("annotations %v, want %v", l.Annotations, want)
	}

	// client-go renews as holder "client-go": the spec changes, the marker stays.
	lock := clientGoLock(ns, name)
	if _, _, err := lock.Get(ctxFor(t)); err != nil {
		t.Fatalf("LeaseLock.Get: %v", err)
	}
	byClientGo := backendtest.SampleRecord("client-go", 6)
	if err := lock.Update(ctxFor(t), toClientGo(byClientGo)); err != nil {
		t.Fatalf("LeaseLock.Update: %v", err)
	}
	got, v, err := b.Get(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	byClientGo.Handoff = offer.Handoff
	backendtest.AssertRecordEqual(t, got, byClientGo)

	// A write without a marker removes the annotation and keeps the others.
	if _, err = b.Update(ctxFor(t), v, backendtest.SampleRecord("a_1", 7)); err != nil {
		t.Fatalf("Update without a marker: %v", err)
	}
	if l, err = leases.Get(ctxFor(t), name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"example.com/owner": "team-billing"}; !maps.Equal(l.Annotations, want) {
		t.Fatalf("annotations %v after a write without a marker, want %v", l.Annotations, want)
	}

	l.Annotations[HandoffAnnotation] = `{"phase":"offer"`
	if _, err := leases.Update(ctxFor(t), l, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("editing the annotation: %v", err)
	}
	got, _, err = b.Get(ctxFor(t))
	if err != nil || !got.Handoff.IsZero() || got.HolderIdentity != "a_1" {
		t.Fatalf("a garbled annotation reads as %+v, %v; want the record without a marker", got, err)
	}
}
