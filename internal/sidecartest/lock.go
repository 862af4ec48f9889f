package sidecartest

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// RunLock runs sidecar lock on the SQLite file db (the test timings, its
// default logging, PATH its only environment, then args) to its end, and
// returns its exit status, its output and how long it took.
func RunLock(t testing.TB, db string, args ...string) (code int, out string, took time.Duration) {
	t.Helper()
	base := append([]string{"lock", "--sqlite-path", db}, TimingArgs()...)
	cmd := exec.Command(Binary(t), append(base, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	began := time.Now()
	output, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(output), time.Since(began)
}
