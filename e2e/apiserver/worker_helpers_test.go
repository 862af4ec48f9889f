package apiserver

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// workerEvent is one JSON line of the worker's stdout.
type workerEvent struct {
	Event, Writer, Value, Error string
	Token                       int64
	Accepted, Stale             bool
}

// workerProc is one running examples/worker.
type workerProc struct {
	cmd    *exec.Cmd
	output *sidecartest.LockedBuffer // stdout and stderr, for failures
	mu     sync.Mutex
	events []workerEvent
	done   chan struct{} // closed when the process has exited
}

func startWorker(t *testing.T, args ...string) *workerProc {
	t.Helper()
	w := &workerProc{output: &sidecartest.LockedBuffer{}, done: make(chan struct{})}
	w.cmd = exec.Command(sidecartest.Build(t, "examples/worker"), args...)
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
			var e workerEvent
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

// await polls the worker's events until one matches, and returns the first
// that does; it fails t after within, or if the worker exits first.
func (w *workerProc) await(t *testing.T, what string, within time.Duration, match func(workerEvent) bool) workerEvent {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		w.mu.Lock()
		events := w.events
		w.mu.Unlock()
		for _, e := range events {
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

func (w *workerProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to worker %d: %v", sig, w.cmd.Process.Pid, err)
	}
}

func (w *workerProc) waitExit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(within):
		t.Fatalf("worker %d still running %v later", w.cmd.Process.Pid, within)
	}
	return w.cmd.ProcessState.ExitCode()
}
