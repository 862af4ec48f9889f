package election

import (
	"strings"

	"github.com/google/uuid"
)

// NewIdentity returns "<prefix>_<random UUID>", an identity unique to this
// process start, in the form controller-runtime uses.
func NewIdentity(prefix string) string {
	return prefix + "_" + uuid.NewString()
}

// IdentityPrefix is the prefix NewIdentity was given: identity up to its
// last "_". An identity without "_" (one a client-go candidate chose, for
// instance) is its own prefix. For a sidecar in a Pod the prefix is the
// Pod's name (POD_NAME), which never contains "_".
func IdentityPrefix(identity string) string {
	if i := strings.LastIndexByte(identity, '_'); i >= 0 {
		return identity[:i]
	}
	return identity
}
