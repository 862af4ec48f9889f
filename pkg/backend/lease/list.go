package lease

import (
	"context"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

var _ backend.Lister = (*Backend)(nil)

// List implements backend.Lister over the Leases of the Backend's
// namespace: the names that begin with prefix, sorted, each Lease read as
// Get reads it.
//
// With Options.SharedWatch, while the shared watch of the namespace runs
// (some Backend of this process on the same Client and namespace is
// watching) and is current, List answers from the Leases as that watch
// has seen them, without a request: as current as the watch stream, so a
// change is in the answer once its event has arrived. Otherwise (no watch
// running, the watch between two requests or backing off, a start over
// until its whole new state is in) and without SharedWatch, it sends one
// list request (read from etcd, not a cache). The list needs the verb list
// on Leases in the namespace.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Listed, error) {
	if b.sharedWatch {
		if out, ok := listWatched(namespaceKey{client: b.client, namespace: b.namespace}, prefix); ok {
			return out, nil
		}
	}
	list, err := b.leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, b.errorf("list", "%w", err)
	}
	var out []backend.Listed
	for i := range list.Items {
		l := &list.Items[i]
		if strings.HasPrefix(l.Name, prefix) {
			out = append(out, listed(l))
		}
	}
	sortListed(out)
	return out, nil
}

// listed is l as List returns it.
func listed(l *coordinationv1.Lease) backend.Listed {
	return backend.Listed{Name: l.Name, Record: recordFromLease(l), Version: backend.Version(l.ResourceVersion)}
}

// sortListed sorts List's answer by name.
func sortListed(out []backend.Listed) {
	slices.SortFunc(out, func(a, b backend.Listed) int { return strings.Compare(a.Name, b.Name) })
}
