package supervise

import (
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// Command is what to run: CMD's path as found in $PATH, its arguments
// (argv[0] first), its environment and its standard streams; and how to
// stop it.
type Command struct {
	Path           string
	Args           []string
	Env            []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// KillGrace is the wait between SIGTERM and SIGKILL once the claim
	// has ended or Stop was called.
	KillGrace time.Duration
	// Log is where what the supervisor did on its own is logged (the
	// claim ended before it was renewed; SIGKILL after KillGrace); nil
	// for nowhere.
	Log *slog.Logger
}

// ErrClaimEnded: the claim had ended before CMD could start, so it did
// not.
var ErrClaimEnded = errors.New("the claim ended before the command started")

// Child is CMD of sidecar lock, running in a process group of its own so
// that a signal reaches everything it started (the commands of a shell
// script too), not the shell alone. On Linux a guardian process stands
// between the lock and CMD, enforces the lock's claim, and kills CMD's
// whole group if the lock dies (see guardian_linux.go); elsewhere the lock
// starts CMD itself.
type Child struct {
	pid  int           // CMD's pid, which is its process group's id
	done chan struct{} // closed when CMD has exited and been reaped
	// Set before done is closed:
	state  *os.ProcessState // how the process the lock started ended
	status int              // CMD's exit status, or 128+n if signal n killed it
	// groupKilled: what was left of CMD's group was killed after CMD
	// exited and before it was reaped, so its pgid could not be reused.
	groupKilled bool
	// claimEnded: CMD's supervisor stopped CMD because the claim ended
	// before it was renewed. Set before done is closed.
	claimEnded atomic.Bool
	// tell passes an order on to CMD's supervisor: the guardian on
	// Linux, a goroutine of this process elsewhere.
	tell func(order)
}

// GuardianArg, first on the command line, makes sidecar the guardian of
// one CMD (Linux, see guardian_linux.go): the binary's main calls
// RunGuardian with the arguments that follow it, before anything else. It
// is internal: --help does not list it, and the guardian refuses to run
// unless a lock set it up.
const GuardianArg = "__sidecar-lock-guardian"

// errNotForUse: the guardian was not started by sidecar lock.
var errNotForUse = errors.New(GuardianArg + " is internal to sidecar lock, not a command to run")

// CommandError is a CMD that cannot be run: not found (exit status 127,
// as a shell answers) or not executable (126).
type CommandError struct{ Err error }

func (e *CommandError) Error() string { return e.Err.Error() }

func (e *CommandError) Unwrap() error { return e.Err }

// ExitStatus is a shell's status for the error: 127 if CMD was not found,
// else 126.
func (e *CommandError) ExitStatus() int {
	if errors.Is(e.Err, exec.ErrNotFound) || errors.Is(e.Err, fs.ErrNotExist) {
		return 127
	}
	return 126
}

// startCommand starts path with args and env on the given streams, in a
// process group of its own. Where the system offers it (Linux), the kernel
// kills it when the thread that started it ends; so it is started, and
// waited for, from one goroutine locked to its OS thread for its whole
// life (the Go runtime may end an idle thread), and what it left in its
// group is killed before it is reaped.
func startCommand(path string, args, env []string, stdin io.Reader, stdout, stderr io.Writer) (*Child, error) {
	cmd := &exec.Cmd{
		Path:   path,
		Args:   args,
		Env:    env,
		Stdin:  stdin,
		Stdout: stdout,
		Stderr: stderr,
		// Output copied through a pipe (not an *os.File) is read on
		// for at most this long after CMD exits, in case what CMD left
		// behind still holds the pipe.
		WaitDelay: time.Second,
	}
	supervisedProcess(cmd)
	c := &Child{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine, after CMD.
		runtime.LockOSThread()
		err := startRecorded(func() (int, error) {
			if err := cmd.Start(); err != nil {
				return 0, err
			}
			return cmd.Process.Pid, nil
		})
		if err == nil {
			c.pid = cmd.Process.Pid
		}
		started <- err
		if err != nil {
			return
		}
		c.groupKilled = killGroupBeforeReaping(c.pid)
		_ = cmd.Wait() // the status is read from ProcessState
		forget(c.pid)
		c.state = cmd.ProcessState
		c.status = exitStatus(cmd.ProcessState)
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, &CommandError{err}
	}
	return c, nil
}

// Pid is CMD's pid, which is its process group's id.
func (c *Child) Pid() int { return c.pid }

// Done is closed once CMD has exited and been reaped.
func (c *Child) Done() <-chan struct{} { return c.done }

// Claim tells CMD's supervisor that the claim now ends at validUntil
// (a time read from this process's clock, with its monotonic reading): it
// stops CMD then unless it hears of a later end first. Claims after Stop,
// or after the claim has ended, change nothing.
func (c *Child) Claim(validUntil time.Time) {
	c.tell(order{kind: claimOrder, until: validUntil})
}

// Stop ends the claim now: CMD's group gets SIGTERM (and SIGCONT, in case
// it is suspended), then SIGKILL after the kill grace unless CMD exited.
// Calling it again does nothing more.
func (c *Child) Stop() {
	c.tell(order{kind: stopOrder})
}

// Signal passes sig on to CMD's process group (best effort: it may be
// gone).
func (c *Child) Signal(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		s = syscall.SIGTERM
	}
	c.tell(order{kind: signalOrder, sig: s})
}

// signalUnlessReaped sends sig to CMD's group unless CMD has been reaped
// (its pid, the group's id, may then name another group).
func (c *Child) signalUnlessReaped(sig syscall.Signal) {
	select {
	case <-c.done:
	default:
		signalGroup(c.pid, sig)
	}
}

// ClaimEnded reports whether CMD was stopped because the claim ended
// before the lock told of a later end (the lock was stopped, starved or
// slow, or its renewals failed). Read it once Done is closed.
func (c *Child) ClaimEnded() bool { return c.claimEnded.Load() }

// noteEvent records and logs what the supervisor did on its own.
func (c *Child) noteEvent(log *slog.Logger, ev event, grace time.Duration) {
	if ev == claimEnded {
		c.claimEnded.Store(true)
	}
	if log == nil {
		return
	}
	switch ev {
	case claimEnded:
		log.Warn("the claim ended before it was renewed: stopping the command", "kill grace", grace)
	case killed:
		log.Error("the command outlived --kill-grace: SIGKILL", "kill grace", grace)
	}
}

// KillLeftovers waits until CMD has exited and kills what is left of its
// process group, so nothing it started runs on after the lease is
// released.
func (c *Child) KillLeftovers() {
	<-c.done
	if !c.groupKilled {
		killGroup(c.pid)
	}
}

// ExitStatus is CMD's exit status, or 128+n if signal n killed it, as a
// shell reports it. Call it after Done is closed.
func (c *Child) ExitStatus() int {
	return c.status
}
