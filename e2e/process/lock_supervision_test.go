package process

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// A sidecar lock killed outright (SIGKILL, the OOM killer) takes CMD with
// it: CMD gets SIGKILL from the kernel as the lock dies. The standby lock
// takes over once the lease has run out, and its CMD never runs beside
// the first.
func TestLockKilledTakesItsCommandWithIt(t *testing.T) {
	db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
	first := startLock(t, stubbornScript(j), "--sqlite-path", db)
	started := j.Await(t, "start", 10*time.Second)
	second := startLock(t, stubbornScript(j), "--sqlite-path", db)
	runs := j.SampleRuns(t, 5*time.Millisecond)

	killed := time.Now()
	first.Signal(syscall.SIGKILL)
	sidecartest.AwaitGone(t, started.Pid, 2*time.Second)
	gone := time.Since(killed)
	first.WaitExit(5 * time.Second)
	// The second lock's CMD starts, in a term other than the first's.
	next := j.AwaitOtherTerm(t, "start", started, 3*sidecartest.LeaseDuration)
	time.Sleep(200 * time.Millisecond) // samples with the second CMD alone
	n := runs.Check(t, 100)
	if !second.Alive() || next.Token != started.Token+1 {
		t.Fatalf("journal %v: want the second lock's CMD with the next token", j.Entries(t))
	}
	t.Logf("CMD gone %v after its lock was killed; the next CMD (token %d) started %v after the first CMD's start; %d samples, 0 with both running",
		gone.Round(time.Millisecond), next.Token, next.At.Sub(started.At).Round(time.Millisecond), n)
}

// SIGHUP (a closed terminal, a dropped ssh session) is handled like
// SIGTERM: passed on to CMD, which exits as it likes; then the lock
// releases and another lock's CMD starts at once.
func TestLockPassesSIGHUPOnThenReleases(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
			first := startLock(t, fmt.Sprintf("trap '%s; exit 4' TERM HUP; %s; while :; do sleep 0.01; done",
				j.Line("caught"), j.Line("start")), "--sqlite-path", db)
			j.Await(t, "start", 10*time.Second)
			second := startLock(t, j.Line("next"), "--sqlite-path", db)

			caught, next := j.SignalAndAwaitNext(t, first, second, sig)
			if !strings.Contains(first.Logs(), `"msg":"the command exited; releasing the lease"`) {
				t.Fatalf("no release logged:\n%s", first.Logs())
			}
			// An expiry would take at least 2s (lease 3s, renewals every 1s).
			if gap := next.At.Sub(caught.At); gap > time.Second {
				t.Fatalf("the next CMD started %v after the first caught %v: the lease was not released", gap, sig)
			}
			t.Logf("%v caught by CMD; the next CMD started %v later", sig, next.At.Sub(caught.At).Round(time.Millisecond))
		})
	}
}

// GNU timeout sends its signal to the command and then to its whole
// process group, so the lock gets SIGTERM twice at once. That is one
// signal, not a second one: CMD is stopped and the lease released, and
// another lock's CMD starts at once.
func TestLockUnderTimeoutReleases(t *testing.T) {
	db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
	script := fmt.Sprintf("trap '%s; exit 4' TERM; %s; while :; do sleep 0.01; done", j.Line("caught"), j.Line("start"))
	cmd := exec.Command("timeout", append([]string{"-s", "TERM", "2"}, append([]string{sidecartest.Binary(t)}, lockArgs(script, "--sqlite-path", db)...)...)...)
	first := sidecartest.Track(t, cmd)
	first.WaitServing()
	j.Await(t, "start", 10*time.Second)
	second := startLock(t, j.Line("next"), "--sqlite-path", db)
	if code := first.WaitExit(10 * time.Second); code != 124 {
		t.Fatalf("timeout: exit status %d, want 124:\n%s", code, first.Logs())
	}
	caught := j.Await(t, "caught", time.Second)
	next := j.Await(t, "next", 10*time.Second)
	second.WaitExit(10 * time.Second)
	if gap := next.At.Sub(caught.At); gap > time.Second {
		t.Fatalf("the next CMD started %v after the first caught SIGTERM: the lease was not released:\n%s", gap, first.Logs())
	}
	t.Logf("the next CMD started %v after the first caught timeout's SIGTERM", next.At.Sub(caught.At).Round(time.Millisecond))
}
