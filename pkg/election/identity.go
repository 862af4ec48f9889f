package election

import "github.com/google/uuid"

// NewIdentity returns "<prefix>_<random UUID>", an identity unique to this
// process start, in the form controller-runtime uses.
func NewIdentity(prefix string) string {
	return prefix + "_" + uuid.NewString()
}
