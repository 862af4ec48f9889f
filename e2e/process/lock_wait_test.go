package process

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// holdLock starts a lock on db whose CMD runs until the test ends, and
// waits until it runs.
func holdLock(t *testing.T, db string, j sidecartest.Journal) *sidecartest.Sidecar {
	t.Helper()
	s := startLock(t, j.Line("holder")+"; while :; do sleep 0.05; done", "--sqlite-path", db)
	j.Await(t, "holder", 10*time.Second)
	return s
}

// ranNot fails t if a CMD journalled word.
func ranNot(t *testing.T, j sidecartest.Journal, word string) {
	t.Helper()
	for _, e := range j.Entries(t) {
		if e.Word == word {
			t.Fatalf("the CMD that should not have run did: %v", j.Entries(t))
		}
	}
}

// The exit status when the lock did not lead in time: 124, as timeout(1)
// exits when its command timed out.
const notLedStatus = 124

// --nonblock gives up at once when another candidate holds the lock, and
// runs CMD when nobody does.
func TestLockNonblock(t *testing.T) {
	t.Parallel()
	t.Run("held by another: exit 124 at once", func(t *testing.T) {
		db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
		holdLock(t, db, j)
		code, out, took := sidecartest.RunLock(t, db, "--nonblock", "--", "sh", "-c", j.Line("skipped"))
		if code != notLedStatus || took > sidecartest.RetryPeriod {
			t.Fatalf("exit status %d after %v, want %d at once:\n%s", code, took, notLedStatus, out)
		}
		if out != "" {
			t.Fatalf("output %q, want none (quiet by default)", out)
		}
		ranNot(t, j, "skipped")
		t.Logf("gave up after %v", took.Round(time.Millisecond))
	})
	t.Run("free: runs CMD", func(t *testing.T) {
		code, out, _ := sidecartest.RunLock(t, sidecartest.DBPath(t), "-n", "--", "sh", "-c", "exit 3")
		if code != 3 {
			t.Fatalf("exit status %d, want CMD's 3:\n%s", code, out)
		}
	})
}

// --timeout gives up with 124 when the lock did not lead in time, and
// runs CMD when it leads within it.
func TestLockTimeout(t *testing.T) {
	t.Parallel()
	t.Run("held for longer: exit 124 after the timeout", func(t *testing.T) {
		db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
		holdLock(t, db, j)
		const timeout = time.Second
		code, out, took := sidecartest.RunLock(t, db, "--timeout", timeout.String(), "--", "sh", "-c", j.Line("late"))
		if code != notLedStatus || took < timeout || took > timeout+sidecartest.RetryPeriod {
			t.Fatalf("exit status %d after %v, want %d after %v:\n%s", code, took, notLedStatus, timeout, out)
		}
		if out != "" {
			t.Fatalf("output %q, want none (quiet by default)", out)
		}
		ranNot(t, j, "late")
		t.Logf("gave up after %v", took.Round(time.Millisecond))
	})
	t.Run("released in time: runs CMD", func(t *testing.T) {
		db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
		startLock(t, j.Line("holder")+"; sleep 0.5", "--sqlite-path", db)
		j.Await(t, "holder", 10*time.Second)
		code, out, _ := sidecartest.RunLock(t, db, "--timeout", "5s", "--", "sh", "-c", "exit 3")
		if code != 3 {
			t.Fatalf("exit status %d, want CMD's 3:\n%s", code, out)
		}
	})
}

// sidecar lock prints nothing of its own unless something goes wrong
// (cron mails what a job prints); --verbose shows the INFO lines.
func TestLockIsQuietUnlessVerbose(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	code, out, _ := sidecartest.RunLock(t, db, "--", "sh", "-c", "echo job output")
	if code != 0 || out != "job output\n" {
		t.Fatalf("exit status %d, output %q; want 0 and CMD's output alone", code, out)
	}
	code, out, _ = sidecartest.RunLock(t, db, "--verbose", "--", "true")
	if code != 0 || !strings.Contains(out, "leading: running the command") || !strings.Contains(out, "level=INFO") {
		t.Fatalf("--verbose: exit status %d, output %q; want the INFO lines", code, out)
	}
	code, out, _ = sidecartest.RunLock(t, db, "--", "sh", "-c", "kill -KILL $$")
	if code != 128+9 || out != "" {
		t.Fatalf("exit status %d, output %q; want 137 and nothing (CMD's status says it)", code, out)
	}
}

// A CMD found in $PATH that the kernel cannot run (no #! line, not a
// binary) fails once the lock leads: exit status 126 as a shell's, the
// error named, the lease released (the next run does not wait for it).
func TestLockCommandThatFailsToStart(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	notABinary := filepath.Join(t.TempDir(), "job")
	if err := os.WriteFile(notABinary, []byte("not a program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, _ := sidecartest.RunLock(t, db, "--", notABinary)
	if code != 126 || !strings.Contains(out, "exec format error") {
		t.Fatalf("exit status %d, output %q; want 126 naming the exec format error", code, out)
	}
	code, out, took := sidecartest.RunLock(t, db, "--", "true")
	if code != 0 || took > sidecartest.LeaseDuration/2 {
		t.Fatalf("the next run: exit status %d after %v, want 0 at once (the lease released):\n%s", code, took, out)
	}
}

// The guardian's internal command (Linux) refuses to run unless a lock
// started it (with its report and orders pipes), even given well-formed
// arguments; --help does not list it.
func TestLockGuardianIsNotACommand(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(sidecartest.Binary(t), "__sidecar-lock-guardian", strconv.Itoa(os.Getpid()), "1s", "--", "/bin/sh", "sh", "-c", "touch "+marker)
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "internal to sidecar lock") {
		t.Fatalf("exit status %d, output %q; want 2 and a refusal", code, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran")
	}
	help, _ := exec.Command(sidecartest.Binary(t), "--help").CombinedOutput()
	if strings.Contains(string(help), "guardian") {
		t.Fatalf("--help lists the guardian:\n%s", help)
	}
}
