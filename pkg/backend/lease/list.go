package lease

import (
	"context"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

var _ backend.Lister = (*Backend)(nil)

// List implements backend.Lister over the Leases of the Backend's
// namespace: one list request (read from etcd, not a cache), the names
// that begin with prefix kept, each Lease read as Get reads it. It needs
// the verb list on Leases in the namespace.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Listed, error) {
	list, err := b.leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, b.errorf("list", "%w", err)
	}
	var out []backend.Listed
	for i := range list.Items {
		l := &list.Items[i]
		if strings.HasPrefix(l.Name, prefix) {
			out = append(out, backend.Listed{Name: l.Name, Record: recordFromLease(l), Version: backend.Version(l.ResourceVersion)})
		}
	}
	slices.SortFunc(out, func(a, b backend.Listed) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
