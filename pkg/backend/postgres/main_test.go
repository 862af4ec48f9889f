package postgres_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/pgtest"
)

// server is the one PostgreSQL server of the package's tests; each test
// works in a table (or schema) of its own.
var server pgtest.Once

func TestMain(m *testing.M) {
	code := m.Run()
	if err := server.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping PostgreSQL: %v\n", err)
		code = 1
	}
	os.Exit(code)
}
