package apiserver

import (
	"os"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestMain runs six tests at once unless -parallel says otherwise: they
// wait on lease durations, renew deadlines and probes far more than they
// compute.
func TestMain(m *testing.M) {
	sidecartest.WaitBoundParallel(6)
	os.Exit(sidecartest.Main(m))
}
