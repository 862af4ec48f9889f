package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// TestList lists through separate handles on one file, as separate
// processes would.
func TestList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	backendtest.RunList(t, func(t *testing.T, name string) backend.Backend { return openT(t, path, name) })
}
