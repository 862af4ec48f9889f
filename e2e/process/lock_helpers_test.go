package process

import (
	"os"
	"os/exec"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// sidecar lock as a process: each CMD is a shell script that appends what
// it does to a sidecartest.Journal shared by every run of the test.

// lockArgs are the arguments of sidecar lock with the test timings, JSON
// logs at level info (the lock's "serving" line names its app API's
// address) and the app API on a free loopback port, then args, then
// -- sh -c script.
func lockArgs(script string, args ...string) []string {
	base := append([]string{"lock", "--http-address", "127.0.0.1:0", "--log-format", "json", "--log-level", "info"},
		sidecartest.TimingArgs()...)
	return append(append(base, args...), "--", "sh", "-c", script)
}

// startLock starts sidecar lock (PATH its only environment) and waits
// until it serves its app API.
func startLock(t *testing.T, script string, args ...string) *sidecartest.Sidecar {
	t.Helper()
	s := launchLock(t, script, args...)
	s.WaitServing()
	return s
}

// launchLock starts sidecar lock without waiting for it to serve.
func launchLock(t *testing.T, script string, args ...string) *sidecartest.Sidecar {
	t.Helper()
	cmd := exec.Command(sidecartest.Binary(t), lockArgs(script, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	return sidecartest.Track(t, cmd)
}

// stubbornScript is a CMD that ignores SIGTERM: it journals "start" and
// runs until it is killed.
func stubbornScript(j sidecartest.Journal) string {
	return "trap '' TERM; " + j.Line("start") + "; while :; do sleep 0.01; done"
}
