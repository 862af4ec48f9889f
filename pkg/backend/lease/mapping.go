package lease

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// HandoffAnnotation is the Lease annotation that holds the record's
// hand-off marker (backend.EncodeHandoff: compact JSON), absent when there
// is none. client-go's LeaseLock writes the spec over the object it read
// last, so its writes keep the annotation as they find it; the election
// makes such a leftover marker inert (see package election).
const HandoffAnnotation = "leader-sidecar.io/handoff"

// GroupAnnotation is the Lease annotation that holds the record's
// shard-group mark (backend.EncodeGroupMark: compact JSON such as
// {"shards":4}), absent when there is none. Kept like HandoffAnnotation.
const GroupAnnotation = "leader-sidecar.io/shard-group"

// recordFromLease is the record a Lease holds: its spec (recordFromSpec)
// and the hand-off marker of its annotation (backend.DecodeHandoff: absent
// or garbled reads as none).
func recordFromLease(l *coordinationv1.Lease) backend.Record {
	rec := recordFromSpec(&l.Spec)
	rec.Handoff = backend.DecodeHandoff(l.Annotations[HandoffAnnotation])
	rec.Group = backend.DecodeGroupMark(l.Annotations[GroupAnnotation])
	return rec
}

// applyMarks writes rec's hand-off marker and group mark into the
// annotations of meta: each set when there is one, removed when there is
// none. Every other annotation is kept.
func applyMarks(meta *metav1.ObjectMeta, rec backend.Record) {
	setAnnotation(meta, HandoffAnnotation, backend.EncodeHandoff(rec.Handoff))
	setAnnotation(meta, GroupAnnotation, backend.EncodeGroupMark(rec.Group))
}

// setAnnotation sets key to value in meta, or removes it when value is "".
func setAnnotation(meta *metav1.ObjectMeta, key, value string) {
	if value == "" {
		delete(meta.Annotations, key)
		return
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[key] = value
}

// recordFromSpec reads the election record out of a Lease spec the way
// client-go's LeaseSpecToLeaderElectionRecord does: every absent field is
// the zero value, and present values are taken as they are.
//
// It never fails and never panics, whatever a hand-edited Lease holds:
//
//	holderIdentity       absent -> "" (a released record)
//	leaseDurationSeconds absent -> 0; 0 or negative are kept as they are
//	                     (the election then uses its own lease duration)
//	acquireTime          absent, or present but zero -> zero time.Time
//	renewTime            absent, or present but zero -> zero time.Time
//	leaseTransitions     absent -> 0; a negative value is kept as it is
//	                     (the election never issues a token below 1)
//
// The API server's validation refuses leaseDurationSeconds <= 0 and
// leaseTransitions < 0, so the negative cases only guard against objects
// that did not come through it.
func recordFromSpec(spec *coordinationv1.LeaseSpec) backend.Record {
	var rec backend.Record
	if spec == nil {
		return rec
	}
	if spec.HolderIdentity != nil {
		rec.HolderIdentity = *spec.HolderIdentity
	}
	if spec.LeaseDurationSeconds != nil {
		rec.LeaseDurationSeconds = *spec.LeaseDurationSeconds
	}
	if spec.LeaseTransitions != nil {
		rec.Transitions = int64(*spec.LeaseTransitions)
	}
	rec.AcquireTime = fromMicroTime(spec.AcquireTime)
	rec.RenewTime = fromMicroTime(spec.RenewTime)
	return rec
}

// applyRecord writes rec into spec the way client-go's
// LeaderElectionRecordToLeaseSpec does: all five fields are set, the two
// times as MicroTime at microsecond precision. A zero time is written as an
// absent field, where client-go sends a zero MicroTime; both read back as
// the zero time, by client-go and by recordFromSpec. Every other spec field (strategy, preferredHolder and any
// future one) is left as it is. rec must have passed backend.CheckRecord.
func applyRecord(spec *coordinationv1.LeaseSpec, rec backend.Record) {
	holder := rec.HolderIdentity
	duration := rec.LeaseDurationSeconds
	transitions := int32(rec.Transitions) // in range: callers ran backend.CheckRecord
	spec.HolderIdentity = &holder
	spec.LeaseDurationSeconds = &duration
	spec.AcquireTime = toMicroTime(rec.AcquireTime)
	spec.RenewTime = toMicroTime(rec.RenewTime)
	spec.LeaseTransitions = &transitions
}

// toMicroTime converts t for a Lease spec: nil for the zero time, else t in
// UTC truncated to the microseconds a MicroTime keeps.
func toMicroTime(t time.Time) *metav1.MicroTime {
	if t.IsZero() {
		return nil
	}
	m := metav1.NewMicroTime(t.UTC().Truncate(backend.TimePrecision))
	return &m
}

// fromMicroTime converts a Lease spec time back: absent or zero gives the
// zero time.Time, anything else the same instant in UTC.
func fromMicroTime(m *metav1.MicroTime) time.Time {
	if m == nil || m.IsZero() {
		return time.Time{}
	}
	return m.UTC()
}

// RecordOf is the record a Lease holds, read as Get reads it: its spec
// (recordFromSpec) and its hand-off marker. For commands that list Leases
// (sidecar status).
func RecordOf(l *coordinationv1.Lease) backend.Record { return recordFromLease(l) }

// HoldsElection reports whether a Lease holds a leader-election record:
// one that this backend or client-go's leaderelection wrote, both of which
// always set spec.leaseTransitions (and spec.acquireTime once held). The
// Leases the kubelet and the API server renew as heartbeats (the Node
// Leases in kube-node-lease, the API servers' identity Leases) set
// neither.
func HoldsElection(l *coordinationv1.Lease) bool {
	return l.Spec.LeaseTransitions != nil || l.Spec.AcquireTime != nil
}
