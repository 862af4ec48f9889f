package lease

import (
	"context"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Update implements backend.Backend with a compare-and-swap on the Lease's
// resourceVersion.
//
// The Lease sent is the one stored at version prev with the record written
// into its spec, its hand-off marker into the HandoffAnnotation and its
// group mark into the GroupAnnotation (each set, or removed when the record
// carries none): labels, other annotations, owner
// references and the spec fields the record does not cover are kept. That object comes from what this
// Backend last read or wrote at exactly prev, or else from a fresh Get; if
// the fresh Get shows another version, Update returns ErrConflict without
// writing. Either way the object sent carries resourceVersion prev, which is
// the precondition, and the Lease's UID, which makes a PUT on a deleted
// Lease fail instead of recreating it (Leases allow create-on-update).
func (b *Backend) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	if err := backend.CheckRecord(rec); err != nil {
		return "", b.errorf("update", "%w", err)
	}
	if prev == "" {
		return "", b.errorf("update", "empty version: %w", backend.ErrConflict)
	}
	base := b.known.get(prev)
	if base == nil {
		current, err := b.leases.Get(ctx, b.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "", b.errorf("update", "%w: %w", backend.ErrNotFound, err)
		case err != nil:
			return "", b.errorf("update", "read before write: %w", err)
		case current.ResourceVersion != string(prev):
			b.known.put(current)
			return "", b.errorf("update", "from version %s (stored %s): %w", prev, current.ResourceVersion, backend.ErrConflict)
		}
		base = current
	}

	next := base.DeepCopy()
	next.ResourceVersion = string(prev)
	next.ManagedFields = nil // nil leaves them to the API server
	applyRecord(&next.Spec, rec)
	applyMarks(&next.ObjectMeta, rec)
	updated, err := b.leases.Update(ctx, next, metav1.UpdateOptions{})
	switch {
	case apierrors.IsConflict(err):
		return "", b.errorf("update", "from version %s: %w: %w", prev, backend.ErrConflict, err)
	case apierrors.IsNotFound(err):
		return "", b.errorf("update", "%w: %w", backend.ErrNotFound, err)
	case err != nil:
		return "", b.errorf("update", "%w", err)
	}
	b.known.put(updated)
	return backend.Version(updated.ResourceVersion), nil
}

// cacheSize is how many recent versions of the Lease a Backend remembers.
// The election updates from the version it read or wrote last, so a few
// are plenty.
const cacheSize = 4

// objectCache remembers the Lease as it was at a few recent
// resourceVersions. It only supplies metadata to keep; it never decides
// which version an Update is conditional on.
type objectCache struct {
	mu      sync.Mutex
	objects map[backend.Version]*coordinationv1.Lease
	order   []backend.Version
}

// put remembers l (a copy) at its resourceVersion, forgetting the oldest
// entry when full.
func (c *objectCache) put(l *coordinationv1.Lease) {
	if l == nil || l.ResourceVersion == "" {
		return
	}
	v := backend.Version(l.ResourceVersion)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.objects == nil {
		c.objects = make(map[backend.Version]*coordinationv1.Lease, cacheSize)
	}
	if _, ok := c.objects[v]; !ok {
		c.order = append(c.order, v)
	}
	c.objects[v] = l.DeepCopy()
	for len(c.order) > cacheSize {
		delete(c.objects, c.order[0])
		c.order = c.order[1:]
	}
}

// get returns the Lease remembered at version v, or nil.
func (c *objectCache) get(v backend.Version) *coordinationv1.Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.objects[v]
}
