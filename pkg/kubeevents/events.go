// Package kubeevents reports leadership changes as Kubernetes Events
// (events.k8s.io/v1) about the sidecar's own Pod, related to the Lease.
//
// Recording is best effort and never delays or changes the election: an
// Event is queued without blocking (a full queue drops it, logged) and one
// background goroutine, started with the first Event, creates it. When
// the API server answers with an error (a missing permission, a rejected
// Event), the Event is dropped and the answer logged; when it cannot be
// reached, the Event is tried again every 10 seconds, 12 times in all, as
// client-go's event broadcaster does.
//
// Each Event is a new object named <pod>.<hex nanoseconds>, with the
// fields client-go's events recorder sets. Repeated Events are not merged
// into series (which would need the patch permission): a leadership change
// is rare, and each one is its own Event, so create on events.k8s.io
// events is the only permission needed.
package kubeevents

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// Controller is the reporting controller named in every Event.
const Controller = "leader-sidecar"

// Reason is the reason of every Event, as client-go's leader election uses.
const Reason = "LeaderElection"

// maxNote is the longest note the API server accepts, in bytes.
const maxNote = 1024

// Pod identifies the Pod the sidecar runs in (from the Downward API:
// POD_NAMESPACE, POD_NAME, POD_UID). UID may be empty.
type Pod struct {
	Namespace, Name, UID string
}

// Config configures a Recorder.
type Config struct {
	// Client writes the Events; required.
	Client *kubeclient.Client
	// Pod is what every Event is about; Name is required, and an empty
	// Namespace is LeaseNamespace.
	Pod Pod
	// LeaseNamespace and LeaseName name the Lease every Event relates to.
	LeaseNamespace, LeaseName string
	// Identity names this candidate in the notes.
	Identity string
	// Logger receives Events that could not be written; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Recorder turns leadership changes into Events. It implements
// election.Observer, and its methods never block.
type Recorder struct {
	pod, lease *corev1.ObjectReference
	identity   string
	instance   string // reportingInstance: Controller-<hostname>
	sender     *sender
}

var _ election.Observer = (*Recorder)(nil)

// New returns a Recorder; it sends nothing, and starts no goroutine,
// before the first Event. Call Stop when done.
func New(cfg Config) (*Recorder, error) {
	if cfg.Client == nil {
		return nil, errors.New("kubeevents: a Kubernetes client is required")
	}
	if cfg.Pod.Name == "" {
		return nil, errors.New("kubeevents: the Pod's name is required (POD_NAME from the Downward API)")
	}
	if cfg.Pod.Namespace == "" {
		cfg.Pod.Namespace = cfg.LeaseNamespace
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	hostname, _ := os.Hostname()
	return &Recorder{
		pod: &corev1.ObjectReference{
			APIVersion: "v1", Kind: "Pod",
			Namespace: cfg.Pod.Namespace, Name: cfg.Pod.Name, UID: types.UID(cfg.Pod.UID),
		},
		lease: &corev1.ObjectReference{
			APIVersion: "coordination.k8s.io/v1", Kind: "Lease",
			Namespace: cfg.LeaseNamespace, Name: cfg.LeaseName,
		},
		identity: cfg.Identity,
		instance: Controller + "-" + hostname,
		sender:   newSender(cfg.Client.Events(cfg.Pod.Namespace), cfg.Logger),
	}, nil
}

// LeadershipChanged implements election.Observer.
func (r *Recorder) LeadershipChanged(leading bool, token int64) {
	if leading {
		r.record(corev1.EventTypeNormal, "BecameLeader",
			fmt.Sprintf("%s became leader of %s with fencing token %d", r.identity, r.leaseName(), token))
		return
	}
	r.record(corev1.EventTypeNormal, "StoppedLeading",
		fmt.Sprintf("%s stopped leading %s (token %d)", r.identity, r.leaseName(), token))
}

// AppUnhealthy records that this candidate stepped down from its term of
// token because its app failed its health check (a Warning Event: the app
// needs looking at).
func (r *Recorder) AppUnhealthy(token int64, cause error) {
	r.record(corev1.EventTypeWarning, "SteppedDownAppUnhealthy",
		fmt.Sprintf("%s stopped leading %s (token %d) because its app is unhealthy: %v", r.identity, r.leaseName(), token, cause))
}

// RenewFailed implements election.Observer; failures are logged and
// counted elsewhere, not recorded as Events.
func (r *Recorder) RenewFailed(error) {}

// TokenAnomaly implements election.Observer: a Warning Event, since an
// operator may have to act (see docs/backends.md on resetting tokens).
func (r *Recorder) TokenAnomaly(a election.TokenAnomaly, seen, highest int64) {
	r.record(corev1.EventTypeWarning, string(a),
		fmt.Sprintf("%s found token %d in %s, highest seen %d: %s", r.identity, seen, r.leaseName(), highest, a))
}

// LeaseDurationBounded implements election.LeaseBoundObserver: a Warning
// Event, since a record that declares so long a lease delays every
// fail-over and its writer needs fixing.
func (r *Recorder) LeaseDurationBounded(holder string, declared, bound time.Duration) {
	r.record(corev1.EventTypeWarning, "RecordLeaseBounded",
		fmt.Sprintf("%s found %s declaring a lease duration of %v (holder %q), longer than it trusts: waited out as %v",
			r.identity, r.leaseName(), declared, holder, bound))
}

// Stop waits until every Event recorded so far has been written or given
// up (at most flushTimeout, for an API server that cannot be reached),
// then stops the background goroutine. Events recorded after Stop are
// dropped. It is safe to call more than once.
func (r *Recorder) Stop() { r.sender.stop() }

// record queues one Event, made the way client-go's events recorder makes
// it.
func (r *Recorder) record(eventType, action, note string) {
	if len(note) > maxNote {
		note = note[:maxNote]
	}
	now := time.Now()
	r.sender.enqueue(&eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%v.%x", r.pod.Name, now.UnixNano()),
			Namespace: r.pod.Namespace,
		},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: Controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              Reason,
		Regarding:           *r.pod,
		Related:             r.lease,
		Note:                note,
		Type:                eventType,
	})
}

func (r *Recorder) leaseName() string {
	return fmt.Sprintf("Lease %s/%s", r.lease.Namespace, r.lease.Name)
}
