package kubeclient

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// resource is one namespaced resource of a group's REST client. Every
// request is made by client-go's request builder exactly as its typed
// clients make it (k8s.io/client-go/gentype): protobuf first, the options
// as query parameters through the scheme's parameter codec.
type resource struct {
	client    rest.Interface
	name      string // plural, e.g. "leases"
	namespace string
}

// GetClient returns the REST client underneath.
func (r resource) GetClient() rest.Interface { return r.client }

func (r resource) request(verb *rest.Request) *rest.Request {
	return verb.UseProtobufAsDefault().Namespace(r.namespace).Resource(r.name)
}

func (r resource) get(ctx context.Context, name string, opts *metav1.GetOptions, into runtime.Object) error {
	return r.request(r.client.Get()).Name(name).VersionedParams(opts, theKinds().parameterCodec).Do(ctx).Into(into)
}

func (r resource) create(ctx context.Context, obj runtime.Object, opts *metav1.CreateOptions, into runtime.Object) error {
	return r.request(r.client.Post()).VersionedParams(opts, theKinds().parameterCodec).Body(obj).Do(ctx).Into(into)
}

// Leases reads, writes and watches the Leases of one namespace.
type Leases struct{ resource }

// Get returns the Lease called name.
func (l *Leases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	return out, l.get(ctx, name, &opts, out)
}

// Create creates lease and returns it as stored.
func (l *Leases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	return out, l.create(ctx, lease, &opts, out)
}

// Update replaces the Lease of lease's name with lease, if its
// resourceVersion is still the stored one, and returns it as stored.
func (l *Leases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.request(l.client.Put()).Name(lease.Name).VersionedParams(&opts, theKinds().parameterCodec).Body(lease).Do(ctx).Into(out)
	return out, err
}

// List returns the Leases opts selects.
func (l *Leases) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	out := &coordinationv1.LeaseList{}
	err := l.request(l.client.Get()).VersionedParams(&opts, theKinds().parameterCodec).Timeout(timeoutOf(opts)).Do(ctx).Into(out)
	return out, err
}

// Watch watches the Leases opts selects.
func (l *Leases) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return l.request(l.client.Get()).VersionedParams(&opts, theKinds().parameterCodec).Timeout(timeoutOf(opts)).Watch(ctx)
}

// Pods reads and patches the Pods of one namespace.
type Pods struct{ resource }

// Get returns the Pod called name.
func (p *Pods) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	return out, p.get(ctx, name, &opts, out)
}

// Patch patches the Pod called name (or its subresource) with data.
func (p *Pods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := p.request(p.client.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&opts, theKinds().parameterCodec).Body(data).Do(ctx).Into(out)
	return out, err
}

// Events writes the events.k8s.io/v1 Events of one namespace.
type Events struct{ resource }

// Create creates event and returns it as stored.
func (e *Events) Create(ctx context.Context, event *eventsv1.Event, opts metav1.CreateOptions) (*eventsv1.Event, error) {
	out := &eventsv1.Event{}
	return out, e.create(ctx, event, &opts, out)
}

// timeoutOf is the request timeout opts asks for (0: none).
func timeoutOf(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
