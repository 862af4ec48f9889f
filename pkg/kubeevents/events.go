// Package kubeevents reports leadership changes as Kubernetes Events
// (events.k8s.io/v1) about the sidecar's own Pod, related to the Lease.
//
// Recording is best effort: Events are queued and sent in the background
// by client-go's event broadcaster, which retries and drops rather than
// blocks. A failure to record never delays or changes the election.
package kubeevents

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// Controller is the reporting controller named in every Event.
const Controller = "leader-sidecar"

// Reason is the reason of every Event, as client-go's leader election uses.
const Reason = "LeaderElection"

// Pod identifies the Pod the sidecar runs in (from the Downward API:
// POD_NAMESPACE, POD_NAME, POD_UID). UID may be empty.
type Pod struct {
	Namespace, Name, UID string
}

// Recorder turns leadership changes into Events. It implements
// election.Observer.
type Recorder struct {
	broadcaster events.EventBroadcaster
	cancel      context.CancelFunc
	sink        *countingSink
	recorder    events.EventRecorder
	pod, lease  *corev1.ObjectReference
	identity    string
}

var _ election.Observer = (*Recorder)(nil)

// New starts a recorder that writes Events through client until Stop.
func New(client kubernetes.Interface, pod Pod, leaseNamespace, leaseName, identity string) (*Recorder, error) {
	sink := &countingSink{EventSink: &events.EventSinkImpl{Interface: client.EventsV1()}}
	b := events.NewBroadcaster(sink)
	ctx, cancel := context.WithCancel(context.Background())
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("events: %w", err)
	}
	return &Recorder{
		broadcaster: b,
		cancel:      cancel,
		sink:        sink,
		recorder:    b.NewRecorder(scheme.Scheme, Controller),
		pod: &corev1.ObjectReference{
			APIVersion: "v1", Kind: "Pod",
			Namespace: pod.Namespace, Name: pod.Name, UID: types.UID(pod.UID),
		},
		lease: &corev1.ObjectReference{
			APIVersion: "coordination.k8s.io/v1", Kind: "Lease",
			Namespace: leaseNamespace, Name: leaseName,
		},
		identity: identity,
	}, nil
}

// LeadershipChanged implements election.Observer.
func (r *Recorder) LeadershipChanged(leading bool, token int64) {
	r.sink.pending.Add(1)
	if leading {
		r.recorder.Eventf(r.pod, r.lease, corev1.EventTypeNormal, Reason, "BecameLeader",
			"%s became leader of %s with fencing token %d", r.identity, r.leaseName(), token)
		return
	}
	r.recorder.Eventf(r.pod, r.lease, corev1.EventTypeNormal, Reason, "StoppedLeading",
		"%s stopped leading %s (token %d)", r.identity, r.leaseName(), token)
}

// AppUnhealthy records that this candidate stepped down from its term of
// token because its app failed its health check (a Warning Event: the app
// needs looking at).
func (r *Recorder) AppUnhealthy(token int64, cause error) {
	r.sink.pending.Add(1)
	r.recorder.Eventf(r.pod, r.lease, corev1.EventTypeWarning, Reason, "SteppedDownAppUnhealthy",
		"%s stopped leading %s (token %d) because its app is unhealthy: %v", r.identity, r.leaseName(), token, cause)
}

// RenewFailed implements election.Observer; failures are logged and
// counted elsewhere, not recorded as Events.
func (r *Recorder) RenewFailed(error) {}

// TokenAnomaly implements election.Observer: a Warning Event, since an
// operator may have to act (see the README on resetting tokens).
func (r *Recorder) TokenAnomaly(a election.TokenAnomaly, seen, highest int64) {
	r.sink.pending.Add(1)
	r.recorder.Eventf(r.pod, r.lease, corev1.EventTypeWarning, Reason, string(a),
		"%s found token %d in %s, highest seen %d: %s", r.identity, seen, r.leaseName(), highest, a)
}

// flushTimeout bounds how long Stop waits for Events still on their way.
const flushTimeout = 3 * time.Second

// Stop waits until every Event recorded so far has been written (at most
// flushTimeout, for an API server that refuses them), then stops the
// broadcaster.
func (r *Recorder) Stop() {
	deadline := time.Now().Add(flushTimeout)
	for r.sink.pending.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r.broadcaster.Shutdown()
	r.cancel()
}

// countingSink counts the Events recorded but not yet written. A repeated
// Event is written as a Patch of the first one's series.
type countingSink struct {
	events.EventSink
	pending atomic.Int64
}

func (s *countingSink) written(err error) {
	if err == nil && s.pending.Add(-1) < 0 {
		s.pending.Store(0)
	}
}

func (s *countingSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	out, err := s.EventSink.Create(ctx, ev)
	s.written(err)
	return out, err
}

func (s *countingSink) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	out, err := s.EventSink.Patch(ctx, old, data)
	s.written(err)
	return out, err
}

func (r *Recorder) leaseName() string {
	return fmt.Sprintf("Lease %s/%s", r.lease.Namespace, r.lease.Name)
}
