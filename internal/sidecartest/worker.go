package sidecartest

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Worker is a running application process that prints one JSON object a
// line on stdout, such as examples/worker: each line that decodes into an
// E is kept, in order, and the whole output (stdout and stderr) is logged
// if the test fails. The process is continued (it may have been stopped)
// and killed when the test ends.
type Worker[E any] struct {
	cmd    *exec.Cmd
	output *LockedBuffer
	mu     sync.Mutex
	events []E
	done   chan struct{} // closed when the process has exited
}

// StartWorker starts binary with args and an environment of PATH alone.
func StartWorker[E any](t testing.TB, binary string, args ...string) *Worker[E] {
	t.Helper()
	w := &Worker[E]{output: &LockedBuffer{}, done: make(chan struct{})}
	w.cmd = exec.Command(binary, args...)
	w.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	w.cmd.Stderr = w.output
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = w.output.Write([]byte(sc.Text() + "\n"))
			var e E
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				w.mu.Lock()
				w.events = append(w.events, e)
				w.mu.Unlock()
			}
		}
		_ = w.cmd.Wait() // after the pipe is read to its end
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.cmd.Process.Kill()
		<-w.done
		if t.Failed() {
			t.Logf("worker %d (%s) output:\n%s", w.cmd.Process.Pid, strings.Join(args, " "), w.output.String())
		}
	})
	return w
}

// Pid is the process's ID.
func (w *Worker[E]) Pid() int { return w.cmd.Process.Pid }

// Events returns the events printed so far, in order.
func (w *Worker[E]) Events() []E {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]E(nil), w.events...)
}

// Await polls the events until one matches and returns the first that
// does; it fails t after within, or if the process exits first.
func (w *Worker[E]) Await(t testing.TB, what string, within time.Duration, match func(E) bool) E {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, e := range w.Events() {
			if match(e) {
				return e
			}
		}
		select {
		case <-w.done:
			t.Fatalf("worker exited (%v) while waiting for %s", w.cmd.ProcessState, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Signal sends sig to the process.
func (w *Worker[E]) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to worker %d: %v", sig, w.cmd.Process.Pid, err)
	}
}

// WaitExit waits for the process to exit and returns its exit status; it
// fails t if the process still runs after within.
func (w *Worker[E]) WaitExit(t testing.TB, within time.Duration) int {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(within):
		t.Fatalf("worker %d still running %v later", w.cmd.Process.Pid, within)
	}
	return w.cmd.ProcessState.ExitCode()
}

// StopOutsideWrites stops processes at an instant when none of pids holds
// a POSIX write lock on files (SQLite databases, with their -wal, -shm and
// -journal files): stop sends them SIGSTOP, cont SIGCONT. A process
// stopped inside a write transaction keeps every other writer of the file
// out, which is a store outage, not the pause of one process a test
// means. Caught inside one, it continues them and tries again a moment
// later; with no files it stops them at once.
func StopOutsideWrites(t testing.TB, stop, cont func(), pids []int, files ...string) {
	t.Helper()
	inodes := map[string]bool{}
	for _, f := range files {
		for _, name := range []string{f, f + "-wal", f + "-shm", f + "-journal"} {
			if fi, err := os.Stat(name); err == nil {
				inodes[strconv.FormatUint(fi.Sys().(*syscall.Stat_t).Ino, 10)] = true
			}
		}
	}
	held := map[string]bool{}
	for _, p := range pids {
		held[strconv.Itoa(p)] = true
	}
	for try := range 100 {
		stop()
		if len(inodes) == 0 {
			return
		}
		locks, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Fatal(err)
		}
		writing := false
		for line := range strings.SplitSeq(string(locks), "\n") {
			// 2: POSIX  ADVISORY  WRITE 12665 fe:00:10625474 120 120
			f := strings.Fields(line)
			if len(f) < 6 || f[1] != "POSIX" || f[3] != "WRITE" || !held[f[4]] {
				continue
			}
			dev := strings.Split(f[5], ":")
			writing = writing || inodes[dev[len(dev)-1]]
		}
		if !writing {
			if try > 0 {
				t.Logf("stopped outside a write transaction at try %d", try+1)
			}
			return
		}
		cont()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("could not stop the processes outside a write transaction in 100 tries")
}
