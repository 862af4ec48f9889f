package apiserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// When sidecar lock loses leadership, CMD gets SIGTERM, then SIGKILL after
// --kill-grace, and the lock exits 1 saying why.

// lostLock starts a lock on db whose CMD journals "start" and loops, and
// which on SIGTERM journals "caught" and exits 5 (or ignores SIGTERM).
func lostLock(t *testing.T, j sidecartest.Journal, db string, ignoreTERM bool, args ...string) (*sidecartest.Sidecar, sidecartest.Entry) {
	t.Helper()
	trap := fmt.Sprintf("trap '%s; exit 5' TERM", j.Line("caught"))
	if ignoreTERM {
		trap = "trap '' TERM"
	}
	script := fmt.Sprintf("%s; %s; while :; do sleep 0.05; done", trap, j.Line("start"))
	s := startLock(t, nil, script, append([]string{"--sqlite-path", db}, args...)...)
	return s, j.Await(t, "start", 10*time.Second)
}

// awaitLost waits for the lock to exit 1, having logged that leadership
// was lost for reason, and returns when it exited.
func awaitLost(t *testing.T, s *sidecartest.Sidecar, reason string) time.Time {
	t.Helper()
	if code := s.WaitExit(20 * time.Second); code != 1 {
		t.Fatalf("exit status %d, want 1:\n%s", code, s.Logs())
	}
	exited := time.Now()
	logs := s.Logs()
	if !strings.Contains(logs, `"msg":"leadership lost: stopping the command"`) || !strings.Contains(logs, reason) ||
		!strings.Contains(logs, `"msg":"leadership was lost while the command ran; exiting 1"`) {
		t.Fatalf("the logs do not say that leadership was lost (%s):\n%s", reason, logs)
	}
	return exited
}

func TestLockStopsTheCommandWhenTheStoreIsLost(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		ignoreTERM bool
	}{
		{"CMD exits on SIGTERM", false},
		{"CMD ignores SIGTERM", true},
	}
	const grace = 500 * time.Millisecond
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
			s, started := lostLock(t, j, db, c.ignoreTERM, "--kill-grace", grace.String())
			lose := func() error { return sidecartest.RemoveDatabase(db) }
			lost := time.Now()
			if err := lose(); err != nil {
				t.Fatal(err)
			}
			exited := awaitLost(t, s, "store lost")
			took := exited.Sub(lost)
			if c.ignoreTERM {
				if !strings.Contains(s.Logs(), "the command outlived --kill-grace: SIGKILL") || took < grace {
					t.Fatalf("CMD ignoring SIGTERM ended %v after the loss, want SIGKILL after %v:\n%s", took, grace, s.Logs())
				}
			} else {
				caught := j.Await(t, "caught", time.Second)
				if caught.Token != started.Token || strings.Contains(s.Logs(), "SIGKILL") {
					t.Fatalf("journal %v; logs:\n%s", j.Entries(t), s.Logs())
				}
			}
			sidecartest.AwaitGone(t, started.Pid, 5*time.Second)
			t.Logf("%s: the lock exited %v after the file was deleted", c.name, took.Round(time.Millisecond))
		})
	}
}

// A leader whose renewals fail (another process holds SQLite's write
// lock) stops claiming at its renew deadline, and CMD gets SIGTERM then,
// before a lease duration has passed, so before any other candidate could
// have taken over.
func TestLockStopsTheCommandWhenTheClaimLapses(t *testing.T) {
	t.Parallel()
	db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
	s, started := lostLock(t, j, db, false, "--sqlite-busy-timeout", "100ms")
	unlock := sidecartest.HoldWriteLock(t, db)
	defer unlock()
	held := time.Now()
	caught := j.Await(t, "caught", 2*sidecartest.LeaseDuration)
	if after := caught.At.Sub(held); after > sidecartest.LeaseDuration || caught.Token != started.Token {
		t.Fatalf("CMD got SIGTERM %v after renewals began to fail (token %d), want it within the lease duration %v",
			after, caught.Token, sidecartest.LeaseDuration)
	}
	awaitLost(t, s, "the claim lapsed")
	sidecartest.AwaitGone(t, started.Pid, 5*time.Second)
	t.Logf("CMD got SIGTERM %v after renewals began to fail (renew deadline %v, lease %v)",
		caught.At.Sub(held).Round(time.Millisecond), sidecartest.RenewDeadline, sidecartest.LeaseDuration)
}

// What CMD starts in the background is killed when CMD exits, before the
// lease is released.
func TestLockKillsWhatTheCommandLeftBehind(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	code, out, _ := sidecartest.RunLock(t, sidecartest.DBPath(t), "--", "sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $! > '"+pidFile+"'; exit 0")
	if code != 0 {
		t.Fatalf("exit status %d:\n%s", code, out)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	sidecartest.AwaitGone(t, pid, 5*time.Second)
}
