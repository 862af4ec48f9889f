package apiserver

import (
	"fmt"
	"os"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/pgtest"
	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// postgresServer is the one PostgreSQL server of the package's tests,
// started by the first that needs it (the set test keeps its list there).
var postgresServer pgtest.Once

// TestMain runs six tests at once unless -parallel says otherwise: they
// wait on lease durations, renew deadlines and probes far more than they
// compute.
func TestMain(m *testing.M) {
	sidecartest.WaitBoundParallel(6)
	code := sidecartest.Main(m)
	if err := postgresServer.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping PostgreSQL: %v\n", err)
		code = 1
	}
	os.Exit(code)
}
