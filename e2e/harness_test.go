package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Timings of every test election: short, and far enough apart that a
// release (milliseconds) and an expiry (seconds) cannot be confused.
const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
	// renewInterval is the sidecar's default at these timings (a third of
	// the lease; no flag sets it): the leader's next renewal is at most
	// this far off.
	renewInterval = leaseDuration / 3
)

var sidecarBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "leader-sidecar-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sidecarBin = filepath.Join(dir, "sidecar")
	build := exec.Command(goTool(), "build", "-trimpath", "-o", sidecarBin, "../cmd/sidecar")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the sidecar: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	stopKube()
	os.RemoveAll(dir)
	os.Exit(code)
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// sidecar is one running sidecar process.
type sidecar struct {
	t       *testing.T
	cmd     *exec.Cmd
	logs    *lockedBuffer
	ready   chan struct{} // closed once addr is known or the process ended
	addr    string
	done    chan struct{} // closed when the process has exited
	exitErr error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func timingArgs() []string {
	return []string{
		"--lease-duration", leaseDuration.String(),
		"--renew-deadline", renewDeadline.String(),
		"--retry-period", retryPeriod.String(),
	}
}

// launch starts a sidecar on the SQLite file db without waiting for it to
// listen.
func launch(t *testing.T, db string, extra ...string) *sidecar {
	t.Helper()
	return spawn(t, nil, append([]string{"--sqlite-path", db}, extra...)...)
}

// spawn starts a sidecar with the test timings, a free loopback port, JSON
// logs, the environment env (plus PATH) and args.
func spawn(t *testing.T, env []string, args ...string) *sidecar {
	t.Helper()
	base := append([]string{"--http-address", "127.0.0.1:0", "--log-format", "json"}, timingArgs()...)
	cmd := exec.Command(sidecarBin, append(base, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	return track(t, cmd)
}

// track starts cmd, a sidecar that logs JSON, and follows its logs and exit.
func track(t *testing.T, cmd *exec.Cmd) *sidecar {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &sidecar{t: t, cmd: cmd, logs: &lockedBuffer{}, ready: make(chan struct{}), done: make(chan struct{})}
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		s.readLogs(stderr)
	}()
	go func() {
		<-logsDone // Wait closes the pipe: read it to the end first
		s.exitErr = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-s.done
		if t.Failed() {
			t.Logf("sidecar %d logs:\n%s", cmd.Process.Pid, s.logs.String())
		}
	})
	return s
}

// start launches a sidecar and waits until it serves.
func start(t *testing.T, db string, extra ...string) *sidecar {
	t.Helper()
	s := launch(t, db, extra...)
	s.waitServing()
	return s
}

// readLogs keeps the process's logs and notes the app listener's address.
func (s *sidecar) readLogs(r io.Reader) {
	defer func() {
		select {
		case <-s.ready:
		default:
			close(s.ready)
		}
	}()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		_, _ = s.logs.Write([]byte(line + "\n"))
		var entry struct{ Msg, Listener, Address string }
		if s.addr == "" && json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "serving" && entry.Listener == "app" {
			s.addr = entry.Address
			close(s.ready)
		}
	}
}

func (s *sidecar) waitServing() {
	s.t.Helper()
	select {
	case <-s.ready:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("sidecar %d did not start serving", s.cmd.Process.Pid)
	}
	if s.addr == "" {
		<-s.done
		s.t.Fatalf("sidecar %d exited before serving: %v\n%s", s.cmd.Process.Pid, s.exitErr, s.logs.String())
	}
}

func (s *sidecar) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

func (s *sidecar) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v to %d: %v", sig, s.cmd.Process.Pid, err)
	}
}

// waitExit waits for the process to end and returns its exit code.
func (s *sidecar) waitExit(within time.Duration) int {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(within):
		s.t.Fatalf("sidecar %d still running %v later", s.cmd.Process.Pid, within)
	}
	return s.cmd.ProcessState.ExitCode()
}

// listener waits for the process to log that it serves the listener name
// ("app", "ops") and returns its address.
func (s *sidecar) listener(name string) string {
	s.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, line := range strings.Split(s.logs.String(), "\n") {
			var entry struct{ Msg, Listener, Address string }
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "serving" && entry.Listener == name {
				return entry.Address
			}
		}
	}
	s.t.Fatalf("sidecar %d never served the %s listener", s.cmd.Process.Pid, name)
	return ""
}
