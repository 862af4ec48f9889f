package packaging

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	removeSharedImages()
	os.Exit(code)
}
