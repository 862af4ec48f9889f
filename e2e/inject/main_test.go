package inject

import (
	"os"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

func TestMain(m *testing.M) { os.Exit(sidecartest.Main(m)) }
