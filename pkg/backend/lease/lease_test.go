package lease

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// TestCreateSetsTheOwners: a Lease that Create makes carries
// Options.Owners, and an Update keeps them; without Owners it has none.
func TestCreateSetsTheOwners(t *testing.T) {
	ns := newNamespace(t)
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "web-0", UID: "6f0c3a52-0d4e-4c52-9d5e-2b1f3c4d5e6f"}
	owned, err := New(Options{Client: newClient(t), Namespace: ns, Name: "owned", Owners: []metav1.OwnerReference{owner}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owned.Close() })
	plain := newBackend(t, newClient(t), ns, "plain")
	for _, b := range []*Backend{owned, plain} {
		v, err := b.Create(ctxFor(t), backendtest.SampleRecord("a", 1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Update(ctxFor(t), v, backendtest.SampleRecord("a", 1)); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string][]metav1.OwnerReference{"owned": {owner}, "plain": nil} {
		l, err := admin.CoordinationV1().Leases(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(l.OwnerReferences, want) {
			t.Errorf("Lease %s after a create and an update: owners %+v, want %+v", name, l.OwnerReferences, want)
		}
	}
}
