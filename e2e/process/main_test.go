package process

import (
	"os"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestMain runs four tests at once unless -parallel says otherwise: they
// wait on lease timings, signals and child processes far more than they
// compute.
func TestMain(m *testing.M) {
	sidecartest.WaitBoundParallel(4)
	os.Exit(sidecartest.Main(m))
}
