package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// Options configures a Backend. Every field but Owners and Logger is
// required.
type Options struct {
	// Client talks to the API server; the sidecar makes it with
	// kubeclient.NewClient.
	Client *kubeclient.Client
	// Namespace is the namespace of the Lease.
	Namespace string
	// Name is the name of the Lease, which is the name of the election.
	Name string
	// Owners, optional, are the owner references of a Lease that Create
	// makes (Kubernetes' garbage collector deletes the Lease once they are
	// all gone). Update keeps whatever owner references the Lease has.
	Owners []metav1.OwnerReference
	// Logger receives what Watch cannot do by itself (a watch refused or
	// failing); nil means slog.Default().
	Logger *slog.Logger
	// SharedWatch makes Watch share one watch of every Lease of the
	// namespace with the other Backends of this process that have it set,
	// the same Client and the same Namespace (see Watch), instead of
	// watching this Lease alone. It needs watch (and list, on an API
	// server that cannot stream a watch's initial state) on every Lease of
	// the namespace, which cannot be limited by name; without it, the
	// Backend needs them on its own Lease only. The sidecar's shard mode
	// sets it: its replicas list every Lease of the namespace anyway
	// (List).
	SharedWatch bool
}

// Backend stores the record of one election in one Lease. It is safe for
// concurrent use.
type Backend struct {
	client    *kubeclient.Client
	leases    *kubeclient.Leases
	namespace string
	name      string
	owners    []metav1.OwnerReference
	// log names the Lease; namespaceLog, the namespace alone (the shared
	// watch's messages).
	log, namespaceLog *slog.Logger
	sharedWatch       bool
	known             objectCache
	// latest is the Lease as a Watch last saw it (nil: not seen, or deleted).
	latest atomic.Pointer[coordinationv1.Lease]

	// beforeWatch, when set, is called before every watch request; it may
	// change the request's options or fail it. Tests use it to make the
	// API server end watches early and to make Watch start over. A shared
	// watch calls the hook of one of the Backends it serves.
	beforeWatch func(*metav1.ListOptions) error

	closing    context.Context
	close      context.CancelFunc
	watchersMu sync.Mutex // orders watchers.Add after a Close
	watchers   sync.WaitGroup
}

var (
	_ backend.Backend     = (*Backend)(nil)
	_ backend.Snapshotter = (*Backend)(nil)
)

// New checks opts and returns a Backend. It does no I/O: a Lease that does
// not exist yet is created by the first Create.
func New(opts Options) (*Backend, error) {
	if opts.Client == nil {
		return nil, errors.New("lease: a Kubernetes client is required")
	}
	if opts.Namespace == "" {
		return nil, errors.New("lease: a namespace is required")
	}
	if errs := validation.IsDNS1123Label(opts.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("lease: namespace %q is not a valid namespace name: %s", opts.Namespace, strings.Join(errs, "; "))
	}
	if opts.Name == "" {
		return nil, errors.New("lease: a Lease name is required")
	}
	if errs := validation.IsDNS1123Subdomain(opts.Name); len(errs) > 0 {
		return nil, fmt.Errorf("lease: name %q is not a valid Lease name: %s", opts.Name, strings.Join(errs, "; "))
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	closing, cancel := context.WithCancel(context.Background())
	return &Backend{
		client:       opts.Client,
		leases:       opts.Client.Leases(opts.Namespace),
		namespace:    opts.Namespace,
		name:         opts.Name,
		owners:       slices.Clone(opts.Owners),
		log:          log.With("lease", opts.Namespace+"/"+opts.Name),
		namespaceLog: log.With("namespace", opts.Namespace),
		sharedWatch:  opts.SharedWatch,
		closing:      closing,
		close:        cancel,
	}, nil
}

// Get implements backend.Backend. The version is the Lease's
// resourceVersion, read from etcd (a quorum read, never a cache).
func (b *Backend) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	l, err := b.leases.Get(ctx, b.name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return backend.Record{}, "", b.errorf("get", "%w: %w", backend.ErrNotFound, err)
		}
		return backend.Record{}, "", b.errorf("get", "%w", err)
	}
	b.known.put(l)
	return recordFromLease(l), backend.Version(l.ResourceVersion), nil
}

// Create implements backend.Backend. The new Lease carries only its name,
// namespace, Options.Owners and the record (its hand-off marker and group
// mark, if any, as the HandoffAnnotation and the GroupAnnotation).
func (b *Backend) Create(ctx context.Context, rec backend.Record) (backend.Version, error) {
	if err := backend.CheckRecord(rec); err != nil {
		return "", b.errorf("create", "%w", err)
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.namespace, OwnerReferences: slices.Clone(b.owners)}}
	applyRecord(&l.Spec, rec)
	applyMarks(&l.ObjectMeta, rec)
	created, err := b.leases.Create(ctx, l, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			return "", b.errorf("create", "%w: %w", backend.ErrAlreadyExists, err)
		}
		return "", b.errorf("create", "%w", err)
	}
	b.known.put(created)
	return backend.Version(created.ResourceVersion), nil
}

// Describe implements backend.Backend: "lease:<namespace>/<name>".
func (b *Backend) Describe() string { return "lease:" + b.namespace + "/" + b.name }

// Close implements backend.Backend: it ends every watch started by Watch
// and waits until their goroutines are gone. It is safe to call more than
// once; Get, Create and Update keep working after it.
func (b *Backend) Close() error {
	b.watchersMu.Lock()
	b.close()
	b.watchersMu.Unlock()
	b.watchers.Wait()
	return nil
}

// errorf wraps an error with the Lease and the operation, keeping the API
// server's message (for RBAC, which verb on which resource was refused).
func (b *Backend) errorf(op, format string, args ...any) error {
	return fmt.Errorf("lease %s/%s: %s: "+format, append([]any{b.namespace, b.name, op}, args...)...)
}
