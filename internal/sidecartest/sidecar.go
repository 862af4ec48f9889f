package sidecartest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Timings of every test election: short, and far enough apart that a
// release (milliseconds) and an expiry (seconds) cannot be confused.
const (
	LeaseDuration = 3 * time.Second
	RenewDeadline = 2 * time.Second
	RetryPeriod   = 500 * time.Millisecond
	// RenewInterval is the sidecar's default at these timings (a third of
	// the lease; no flag sets it): the leader's next renewal is at most
	// this far off.
	RenewInterval = LeaseDuration / 3
)

// Sidecar is one running sidecar process of a test: a Proc whose test it
// fails. The test it was started in kills it when it ends, and prints its
// logs if it failed.
type Sidecar struct {
	*Proc
	t testing.TB
}

// TimingArgs are the flags of the test timings.
func TimingArgs() []string {
	return []string{
		"--lease-duration", LeaseDuration.String(),
		"--renew-deadline", RenewDeadline.String(),
		"--retry-period", RetryPeriod.String(),
	}
}

// DBPath is a fresh SQLite path in a directory of t's own.
func DBPath(t testing.TB) string { return filepath.Join(t.TempDir(), "election.db") }

// Launch starts a sidecar on the SQLite file db without waiting for it to
// listen.
func Launch(t testing.TB, db string, extra ...string) *Sidecar {
	t.Helper()
	return Spawn(t, nil, append([]string{"--sqlite-path", db}, extra...)...)
}

// Start launches a sidecar on the SQLite file db and waits until it serves.
func Start(t testing.TB, db string, extra ...string) *Sidecar {
	t.Helper()
	s := Launch(t, db, extra...)
	s.WaitServing()
	return s
}

// StartMany launches n sidecars on db at once, then waits until all serve.
func StartMany(t testing.TB, db string, n int) []*Sidecar {
	t.Helper()
	all := make([]*Sidecar, n)
	for i := range all {
		all[i] = Launch(t, db)
	}
	for _, s := range all {
		s.WaitServing()
	}
	return all
}

// Spawn starts a sidecar with the test timings, a free loopback port, JSON
// logs, the environment env (plus PATH) and args.
func Spawn(t testing.TB, env []string, args ...string) *Sidecar {
	t.Helper()
	return SpawnBinary(t, Binary(t), env, args...)
}

// SpawnBinary is Spawn with another build of the sidecar, such as
// HookedBinary.
func SpawnBinary(t testing.TB, bin string, env []string, args ...string) *Sidecar {
	t.Helper()
	base := append([]string{"--http-address", "127.0.0.1:0", "--log-format", "json"}, TimingArgs()...)
	cmd := exec.Command(bin, append(base, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	return Track(t, cmd)
}

// Track starts cmd, a sidecar that logs JSON, and follows its logs and exit.
func Track(t testing.TB, cmd *exec.Cmd) *Sidecar {
	t.Helper()
	p, err := StartProc(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("sidecar %d logs:\n%s", cmd.Process.Pid, p.logs.String())
		}
	})
	return &Sidecar{Proc: p, t: t}
}

// WaitServing waits until the sidecar serves its app listener, failing the
// test if it exits first or takes more than 30s.
func (s *Sidecar) WaitServing() {
	s.t.Helper()
	select {
	case <-s.ready:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("sidecar %d did not start serving", s.Pid())
	}
	if s.addr == "" {
		<-s.done
		s.t.Fatalf("sidecar %d exited before serving: %v\n%s", s.Pid(), s.exitErr, s.logs.String())
	}
}

// Signal sends sig to the process, failing the test if it cannot.
func (s *Sidecar) Signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v to %d: %v", sig, s.Pid(), err)
	}
}

// WaitExit waits for the process to end and returns its exit code.
func (s *Sidecar) WaitExit(within time.Duration) int {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(within):
		s.t.Fatalf("sidecar %d still running %v later", s.Pid(), within)
	}
	return s.cmd.ProcessState.ExitCode()
}

// Listener waits for the process to log that it serves the listener name
// ("app", "ops") and returns its address.
func (s *Sidecar) Listener(name string) string {
	s.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if addr, ok := s.listener(name); ok {
			return addr
		}
	}
	s.t.Fatalf("sidecar %d never served the %s listener", s.Pid(), name)
	return ""
}

// Without is all but gone.
func Without(all []*Sidecar, gone *Sidecar) []*Sidecar {
	var out []*Sidecar
	for _, s := range all {
		if s != gone {
			out = append(out, s)
		}
	}
	return out
}
