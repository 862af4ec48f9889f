package process

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// tickingScript is a CMD that journals "start" and then "tick" every
// 20 ms until it is stopped: its last line says when it last ran.
func tickingScript(j sidecartest.Journal) string {
	return j.Line("start") + "; while :; do " + j.Line("tick") + "; sleep 0.02; done"
}

// A sidecar lock that is stopped, by job control (SIGTSTP, as a terminal's
// Ctrl-Z sends it to the lock's foreground process group) or by SIGSTOP,
// renews no more; another lock takes over once the lease has run out. Its
// CMD must not run on meanwhile: the guardian stops it when the claim it
// last heard of ends. Two CMDs never run at one instant: the first CMD's
// last line is older than the second CMD's first, and no sample of the
// running processes finds both. Under SIGTSTP the first CMD was suspended
// with its lock (its lines stop at once). The first lock, continued long
// after, exits 1: leadership was lost while CMD ran.
func TestLockStoppedNeverRunsTwoCommandsAtOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		sig  syscall.Signal
	}{{"SIGTSTP", syscall.SIGTSTP}, {"SIGSTOP", syscall.SIGSTOP}} {
		name, sig := c.name, c.sig
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
			first := startLock(t, tickingScript(j), "--sqlite-path", db)
			started := j.Await(t, "start", 10*time.Second)
			j.Await(t, "tick", time.Second)
			runs := j.SampleTerms(t, 5*time.Millisecond)

			stopped := time.Now()
			first.Signal(sig)
			second := startLock(t, tickingScript(j), "--sqlite-path", db)
			time.Sleep(300 * time.Millisecond)
			cmdState, seen := processState(t, started.Pid), time.Now() // T if suspended
			next := j.AwaitOtherTerm(t, "start", started, 4*sidecartest.LeaseDuration)
			// The review's measure: the lock stays stopped 8s, the
			// lease being 3s.
			time.Sleep(time.Until(stopped.Add(8 * time.Second)))
			first.Signal(syscall.SIGCONT)
			code := first.WaitExit(10 * time.Second)

			var lastFirst, firstNext sidecartest.Entry
			for _, e := range j.Entries(t) {
				switch {
				case e.Token == started.Token:
					lastFirst = e
				case firstNext.Token == 0:
					firstNext = e
				}
			}
			if !lastFirst.At.Before(firstNext.At) {
				t.Fatalf("both commands ran at once for %v: the first CMD's last line %v, the second CMD's first %v",
					lastFirst.At.Sub(firstNext.At).Round(time.Millisecond), lastFirst, firstNext)
			}
			n := runs.Check(t, 100)
			if sig == syscall.SIGTSTP {
				// Suspended at once, and for good: no line once its
				// state was seen.
				if cmdState != "T" || lastFirst.At.After(seen) {
					t.Fatalf("the first CMD ran on for %v after its lock got SIGTSTP (its state %q 300ms after): not suspended",
						lastFirst.At.Sub(stopped).Round(time.Millisecond), cmdState)
				}
			}
			if code != 1 || !strings.Contains(first.Logs(), "leadership was lost while the command ran") {
				t.Fatalf("the first lock: exit status %d, want 1 (leadership lost):\n%s", code, first.Logs())
			}
			if !second.Alive() || next.Token != started.Token+1 {
				t.Fatalf("journal %v: want the second lock's CMD with the next token", j.Entries(t))
			}
			t.Logf("%v: the first CMD's last line %v after the stop, the second CMD's first %v after it (%v apart); %d samples, 0 with both terms running",
				name, lastFirst.At.Sub(stopped).Round(time.Millisecond), firstNext.At.Sub(stopped).Round(time.Millisecond),
				firstNext.At.Sub(lastFirst.At).Round(time.Millisecond), n)
		})
	}
}

// Ctrl-Z and fg (SIGTSTP, then SIGCONT, to the lock alone) suspend and
// resume the job as a whole: CMD is suspended with its lock, and resumes
// with it; a suspension shorter than what is left of the claim costs
// nothing, the lock still leads in the same term.
func TestLockSuspendedAndResumedLeadsOn(t *testing.T) {
	t.Parallel()
	db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
	lock := startLock(t, tickingScript(j), "--sqlite-path", db)
	started := j.Await(t, "start", 10*time.Second)

	lock.Signal(syscall.SIGTSTP)
	sidecartest.WaitTrue(t, "CMD is suspended", time.Second, func() bool {
		return processState(t, started.Pid) == "T" && processState(t, lock.Pid()) == "T"
	})
	suspended := time.Now()
	time.Sleep(300 * time.Millisecond)
	lock.Signal(syscall.SIGCONT)
	sidecartest.WaitTrue(t, "CMD runs again", 2*time.Second, func() bool {
		for _, e := range j.Entries(t) {
			if e.Word == "tick" && e.At.After(suspended.Add(300*time.Millisecond)) {
				return processState(t, started.Pid) != "T"
			}
		}
		return false
	})
	for _, e := range j.Entries(t) {
		if e.At.After(suspended) && e.At.Before(suspended.Add(300*time.Millisecond)) {
			t.Fatalf("CMD ran while suspended: %v", e)
		}
	}
	st, err := lock.Leader()
	if err != nil || !st.Leader || st.Token == nil || *st.Token != started.Token {
		t.Fatalf("after fg: /leader %+v, %v; want the same term (token %d)", st, err, started.Token)
	}
	lock.Signal(syscall.SIGTERM)
	if code := lock.WaitExit(10 * time.Second); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit status %d, want CMD's 143:\n%s", code, lock.Logs())
	}
}

// A CMD that runs for several renew deadlines is not stopped: each
// renewal's new end of the claim reaches the guardian, which stops CMD
// only at the end of the claim it last heard of.
func TestLockCommandRunsOnAcrossRenewals(t *testing.T) {
	t.Parallel()
	runFor := 3 * sidecartest.RenewDeadline
	code, out, took := sidecartest.RunLock(t, sidecartest.DBPath(t), "--", "sh", "-c", fmt.Sprintf("sleep %g; exit 3", runFor.Seconds()))
	if code != 3 || took < runFor {
		t.Fatalf("exit status %d after %v, want CMD's 3 after %v:\n%s", code, took, runFor, out)
	}
	if strings.Contains(out, "claim ended") || strings.Contains(out, "leadership lost") {
		t.Fatalf("the claim ended while the lock renewed it:\n%s", out)
	}
}
