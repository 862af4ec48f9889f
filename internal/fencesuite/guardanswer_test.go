package fencesuite_test

import (
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence/fencetest"
)

// checkGuardAnswer fails unless err is what a guard must answer a write of
// term (see fencetest.CheckAnswer).
func checkGuardAnswer(t *testing.T, err error, term fence.TermID, want error) {
	t.Helper()
	if err := fencetest.CheckAnswer(err, term, want); err != nil {
		t.Fatal(err)
	}
}
