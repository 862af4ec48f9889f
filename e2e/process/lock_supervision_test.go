package process

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// A sidecar lock killed outright (SIGKILL, the OOM killer) takes CMD with
// it: its guardian SIGKILLs CMD's group as the lock dies. The standby lock
// takes over once the lease has run out, and its CMD never runs beside
// the first.
func TestLockKilledTakesItsCommandWithIt(t *testing.T) {
	t.Parallel()
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

// A sidecar lock killed outright takes with it what its CMD started, not
// CMD alone: CMD is a shell that starts a job in the background and waits
// for it, the job journaling a line every 10 ms. Within a bound after the
// kill no process of CMD's group runs any more and the job journals no
// more; the standby lock's CMD never runs beside any of them.
func TestLockKilledTakesWhatItsCommandStartedWithIt(t *testing.T) {
	t.Parallel()
	db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
	first := startLock(t, backgroundJobScript(t, j), "--sqlite-path", db)
	started := j.Await(t, "start", 10*time.Second)
	tick := j.Await(t, "tick", 10*time.Second)
	second := startLock(t, stubbornScript(j), "--sqlite-path", db)
	runs := j.SampleTerms(t, 5*time.Millisecond)
	if members := sidecartest.GroupMembers(started.Pid); len(members) < 2 {
		t.Fatalf("CMD's process group %d: %v, want CMD and its job", started.Pid, members)
	}

	killed := time.Now()
	first.Signal(syscall.SIGKILL)
	// A bound far above what it takes, far below the lease (3s).
	const bound = time.Second
	gone := sidecartest.AwaitGroupGone(t, started.Pid, bound)
	for _, pid := range []int{started.Pid, tick.Pid} {
		if !sidecartest.ProcessGone(pid) {
			t.Fatalf("process %d of CMD's group still runs after the group was found empty", pid)
		}
	}
	first.WaitExit(5 * time.Second)
	var next sidecartest.Entry
	sidecartest.WaitTrue(t, "the second lock's CMD starts", 3*sidecartest.LeaseDuration, func() bool {
		for _, e := range j.Entries(t) {
			if e.Word == "start" && e.Token != started.Token {
				next = e
				return true
			}
		}
		return false
	})
	time.Sleep(200 * time.Millisecond) // samples with the second CMD alone
	n := runs.Check(t, 100)
	var lastTick time.Time
	for _, e := range j.Entries(t) {
		if e.Word == "tick" {
			lastTick = e.At
		}
	}
	if after := lastTick.Sub(killed); after > bound {
		t.Fatalf("the job journaled %v after its lock was killed: %v", after, j.Entries(t))
	}
	if !second.Alive() || next.Token != started.Token+1 {
		t.Fatalf("journal %v: want the second lock's CMD with the next token", j.Entries(t))
	}
	t.Logf("CMD's group gone %v after its lock was killed (the job's last line %v after the kill); "+
		"the next CMD (token %d) started %v after the kill; %d samples, 0 with both terms running",
		gone.Round(time.Millisecond), lastTick.Sub(killed).Round(time.Millisecond), next.Token,
		next.At.Sub(killed).Round(time.Millisecond), n)
}

// backgroundJobScript is a CMD that ignores SIGTERM, journals "start",
// starts a job in the background that journals "tick" every 10 ms (and
// ignores SIGTERM too), and waits for it.
func backgroundJobScript(t *testing.T, j sidecartest.Journal) string {
	job := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(job, []byte("trap '' TERM\nwhile :; do "+j.Line("tick")+"; sleep 0.01; done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return "trap '' TERM; " + j.Line("start") + "; sh '" + job + "' & wait"
}

// A lock killed while the guardian it started for CMD sets itself up:
// before the guardian catches its parent-death signal (the signal ends
// it, CMD never starts), or after it checked its parent and before it
// starts CMD (it sees the lock gone once CMD runs, and kills CMD's
// group). The binary's test hook pauses the guardian at that point.
// Either way nothing of CMD runs on.
func TestLockKilledWhileItsGuardianStarts(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"before-handler", "before-start"} {
		t.Run(point, func(t *testing.T) {
			db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
			cmd := exec.Command(sidecartest.HookedBinary(t), lockArgs(backgroundJobScript(t, j), "--sqlite-path", db)...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SIDECAR_E2E_GUARDIAN_PAUSE=" + point}
			lock := sidecartest.Track(t, cmd)
			sidecartest.WaitTrue(t, "the guardian pauses "+point, 10*time.Second, func() bool {
				return strings.Contains(lock.Logs(), "e2e hook: guardian paused "+point)
			})
			children := sidecartest.ChildrenOf(lock.Pid())
			if len(children) != 1 {
				t.Fatalf("the lock's children: %v, want its guardian", children)
			}
			guardian := children[0]
			killed := time.Now()
			lock.Signal(syscall.SIGKILL)
			// The pause is 300ms; a second is far above what it takes
			// after that, far below the lease (3s).
			sidecartest.AwaitGone(t, guardian, time.Second)
			allGone := time.Now()
			gone := allGone.Sub(killed)
			time.Sleep(300 * time.Millisecond)
			entries := j.Entries(t)
			for _, e := range entries {
				if !sidecartest.ProcessGone(e.Pid) {
					t.Fatalf("process %d of CMD still runs %v after its lock was killed: %v", e.Pid, time.Since(killed), entries)
				}
				if e.At.After(allGone) {
					t.Fatalf("CMD journaled after its guardian was gone: %v", entries)
				}
			}
			if point == "before-handler" && len(entries) > 0 {
				t.Fatalf("CMD ran although its lock died before the guardian started it: %v", entries)
			}
			t.Logf("the guardian gone %v after its lock was killed; CMD journaled %d lines", gone.Round(time.Millisecond), len(entries))
		})
	}
}

// SIGHUP (a closed terminal, a dropped ssh session) is handled like
// SIGTERM: passed on to CMD, which exits as it likes; then the lock
// releases and another lock's CMD starts at once.
func TestLockPassesSIGHUPOnThenReleases(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
