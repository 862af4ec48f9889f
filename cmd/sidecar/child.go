package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"time"
)

// child is CMD of sidecar lock, running in a process group of its own so
// that a signal reaches everything it started (the commands of a shell
// script too), not the shell alone. On Linux a guardian process stands
// between the lock and CMD and kills CMD's whole group if the lock dies
// (see guardian_linux.go); elsewhere the lock starts CMD itself.
type child struct {
	pid  int           // CMD's pid, which is its process group's id
	done chan struct{} // closed when CMD has exited and been reaped
	// Set before done is closed:
	state  *os.ProcessState // how the process the lock started ended
	status int              // CMD's exit status, or 128+n if signal n killed it
	// groupKilled: what was left of CMD's group was killed after CMD
	// exited and before it was reaped, so its pgid could not be reused.
	groupKilled bool
}

// guardianArg, first on the command line, makes sidecar the guardian of
// one CMD (Linux, see guardian_linux.go). It is internal: --help does not
// list it, and the guardian refuses to run unless a lock set it up.
const guardianArg = "__sidecar-lock-guardian"

// errNotForUse: the guardian was not started by sidecar lock.
var errNotForUse = errors.New(guardianArg + " is internal to sidecar lock, not a command to run")

// startCommand starts path with args and env on the given streams, in a
// process group of its own. Where the system offers it (Linux), the kernel
// kills it when the thread that started it ends; so it is started, and
// waited for, from one goroutine locked to its OS thread for its whole
// life (the Go runtime may end an idle thread), and what it left in its
// group is killed before it is reaped.
func startCommand(path string, args, env []string, stdin io.Reader, stdout, stderr io.Writer) (*child, error) {
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
	c := &child{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine, after CMD.
		runtime.LockOSThread()
		err := cmd.Start()
		if err == nil {
			c.pid = cmd.Process.Pid
		}
		started <- err
		if err != nil {
			return
		}
		c.groupKilled = killGroupBeforeReaping(c.pid)
		_ = cmd.Wait() // the status is read from ProcessState
		c.state = cmd.ProcessState
		c.status = exitStatus(cmd.ProcessState)
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, &commandError{err}
	}
	return c, nil
}

// signal sends sig to CMD's process group (best effort: it may be gone).
func (c *child) signal(sig os.Signal) {
	signalGroup(c.pid, sig)
}

// killLeftovers kills what is left of CMD's process group once CMD itself
// has exited, so nothing it started runs on after the lease is released.
func (c *child) killLeftovers() {
	<-c.done
	if !c.groupKilled {
		killGroup(c.pid)
	}
}

// exitStatus is CMD's exit status, or 128+n if signal n killed it, as a
// shell reports it. Call it after done is closed.
func (c *child) exitStatus() int {
	return c.status
}
