package memory_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	store := memory.NewStore()
	backendtest.Run(t, func(t *testing.T, name string) backend.Backend {
		return store.Open(name)
	})
}
