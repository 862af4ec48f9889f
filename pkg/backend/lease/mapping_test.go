package lease

import (
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

var someTime = time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)

// TestGetHandEditedLease stores Leases with fields missing, as kubectl
// might leave them, and checks what Get makes of them.
func TestGetHandEditedLease(t *testing.T) {
	ns := newNamespace(t)
	client := newClient(t)
	cases := []struct {
		name string
		spec coordinationv1.LeaseSpec
		want backend.Record
	}{
		{"empty-spec", coordinationv1.LeaseSpec{}, backend.Record{}},
		{"no-holder", coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](15), LeaseTransitions: ptr.To[int32](4)},
			backend.Record{LeaseDurationSeconds: 15, Transitions: 4}},
		{"no-duration-no-renew", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("h"), AcquireTime: &metav1.MicroTime{Time: someTime}},
			backend.Record{HolderIdentity: "h", AcquireTime: someTime}},
		{"no-transitions", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("h"), RenewTime: &metav1.MicroTime{Time: someTime}},
			backend.Record{HolderIdentity: "h", RenewTime: someTime}},
		{"zero-times", coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), AcquireTime: &metav1.MicroTime{}, RenewTime: &metav1.MicroTime{}},
			backend.Record{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: ns}, Spec: c.spec}
			if _, err := admin.CoordinationV1().Leases(ns).Create(ctxFor(t), l, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating the Lease: %v", err)
			}
			got, v, err := newBackend(t, client, ns, c.name).Get(ctxFor(t))
			if err != nil || v == "" {
				t.Fatalf("Get: %v (version %q)", err, v)
			}
			backendtest.AssertRecordEqual(t, got, c.want)
		})
	}
}

// TestAPIServerRejectsNegativeValues documents why Get never sees a
// negative duration or token from the API server: validation refuses them,
// as it refuses a zero duration, whoever writes.
func TestAPIServerRejectsNegativeValues(t *testing.T) {
	ns := newNamespace(t)
	for name, spec := range map[string]coordinationv1.LeaseSpec{
		"zero-duration":        {LeaseDurationSeconds: ptr.To[int32](0)},
		"negative-duration":    {LeaseDurationSeconds: ptr.To[int32](-5)},
		"negative-transitions": {LeaseTransitions: ptr.To[int32](-1)},
	} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
		if _, err := admin.CoordinationV1().Leases(ns).Create(ctxFor(t), l, metav1.CreateOptions{}); err == nil {
			t.Errorf("%s: the API server stored it; Get must then pass it through", name)
		}
	}

	// The backend writes a zero duration as client-go does, and gets the
	// API server's validation error back, wrapped.
	b := newBackend(t, newClient(t), ns, "zero-duration-write")
	rec := backendtest.SampleRecord("a", 1)
	rec.LeaseDurationSeconds = 0
	_, err := b.Create(ctxFor(t), rec)
	if err == nil || errors.Is(err, backend.ErrAlreadyExists) ||
		!strings.Contains(err.Error(), "lease "+ns+"/zero-duration-write: create:") ||
		!strings.Contains(err.Error(), "spec.leaseDurationSeconds") {
		t.Fatalf("Create with a zero lease duration: got %v, want the API server's validation error", err)
	}
}

// TestRecordFromSpecOddValues covers what the API server cannot store:
// nil spec and negative values map without panicking, negatives passed
// through as client-go does.
func TestRecordFromSpecOddValues(t *testing.T) {
	if got := recordFromSpec(nil); got != (backend.Record{}) {
		t.Fatalf("nil spec: %+v", got)
	}
	got := recordFromSpec(&coordinationv1.LeaseSpec{
		LeaseDurationSeconds: ptr.To[int32](-7),
		LeaseTransitions:     ptr.To[int32](-3),
		AcquireTime:          &metav1.MicroTime{Time: time.Unix(0, 0)},
	})
	want := backend.Record{LeaseDurationSeconds: -7, Transitions: -3, AcquireTime: time.Unix(0, 0)}
	backendtest.AssertRecordEqual(t, got, want)
	if got.AcquireTime.IsZero() {
		t.Fatal("the Unix epoch is an instant, not the zero time")
	}
}

// TestApplyRecordKeepsOtherSpecFields: the record's five fields are
// written; strategy and preferredHolder are left alone; times lose only
// their nanoseconds.
func TestApplyRecordKeepsOtherSpecFields(t *testing.T) {
	spec := coordinationv1.LeaseSpec{
		Strategy:        ptr.To(coordinationv1.OldestEmulationVersion),
		PreferredHolder: ptr.To("next"),
		AcquireTime:     &metav1.MicroTime{Time: someTime},
	}
	rec := backend.Record{HolderIdentity: "h", LeaseDurationSeconds: 9,
		RenewTime: someTime.Add(789 * time.Nanosecond), Transitions: backend.MaxTransitions}
	applyRecord(&spec, rec)
	if *spec.Strategy != coordinationv1.OldestEmulationVersion || *spec.PreferredHolder != "next" {
		t.Fatalf("strategy/preferredHolder changed: %v/%v", *spec.Strategy, *spec.PreferredHolder)
	}
	if spec.AcquireTime != nil {
		t.Fatalf("a zero AcquireTime was written as %v, want absent", spec.AcquireTime)
	}
	if *spec.HolderIdentity != "h" || *spec.LeaseDurationSeconds != 9 || *spec.LeaseTransitions != backend.MaxTransitions ||
		!spec.RenewTime.Time.Equal(someTime) {
		t.Fatalf("record not written: %+v", spec)
	}
	rec.RenewTime = someTime
	backendtest.AssertRecordEqual(t, recordFromSpec(&spec), rec)
}

// HoldsElection tells a leader-election record, as this backend and
// client-go write it, from the heartbeats the kubelet and the API servers
// renew, which set neither the transitions nor the acquire time.
func TestHoldsElection(t *testing.T) {
	now := metav1.NewMicroTime(time.Now())
	written := &coordinationv1.Lease{}
	applyRecord(&written.Spec, backendtest.SampleRecord("a_1", 0))
	released := &coordinationv1.Lease{}
	applyRecord(&released.Spec, backend.Record{LeaseDurationSeconds: 1})
	for name, c := range map[string]struct {
		l    *coordinationv1.Lease
		want bool
	}{
		"a record written by Update": {written, true},
		"a released record, token 0": {released, true},
		"acquire time alone":         {&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{AcquireTime: &now}}, true},
		"a node heartbeat":           {&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now}}, false},
		"an empty Lease":             {&coordinationv1.Lease{}, false},
	} {
		if got := HoldsElection(c.l); got != c.want {
			t.Errorf("%s: HoldsElection %v, want %v", name, got, c.want)
		}
	}
	if rec := RecordOf(written); rec.HolderIdentity != "a_1" {
		t.Errorf("RecordOf: %+v", rec)
	}
}
