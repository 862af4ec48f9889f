package main

import (
	"os"
	"os/exec"
	"runtime"
	"time"
)

// child is CMD of sidecar lock, running in a process group of its own so
// that a signal reaches everything it started (the commands of a shell
// script too), not the shell alone. On Linux the kernel kills CMD if the
// lock dies (see dieWithTheLock).
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when CMD has exited and been reaped
}

// startChild starts CMD with env, on the process's standard streams.
//
// CMD is started, and waited for, from one goroutine locked to its OS
// thread for CMD's whole life: the parent-death signal fires when the
// thread that forked CMD ends, not the process, and the Go runtime may end
// an idle thread.
func startChild(cfg lockConfig, p process, env []string) (*child, error) {
	cmd := &exec.Cmd{
		Path:   cfg.path,
		Args:   cfg.command,
		Env:    env,
		Stdin:  p.stdin,
		Stdout: p.stdout,
		Stderr: p.stderr,
		// Output copied through a pipe (not an *os.File) is read on
		// for at most this long after CMD exits, in case what CMD left
		// behind still holds the pipe.
		WaitDelay: time.Second,
	}
	supervisedProcess(cmd)
	c := &child{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine, after CMD.
		runtime.LockOSThread()
		err := cmd.Start()
		started <- err
		if err != nil {
			return
		}
		_ = cmd.Wait() // the status is read from ProcessState
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, &commandError{err}
	}
	return c, nil
}

// signal sends sig to CMD's process group (best effort: it may be gone).
func (c *child) signal(sig os.Signal) {
	signalGroup(c.cmd.Process, sig)
}

// killLeftovers kills what is left of CMD's process group once CMD itself
// has exited, so nothing it started runs on after the lease is released.
func (c *child) killLeftovers() {
	<-c.done
	killGroup(c.cmd.Process)
}

// exitStatus is CMD's exit status, or 128+n if signal n killed it, as a
// shell reports it. Call it after done is closed.
func (c *child) exitStatus() int {
	return exitStatus(c.cmd.ProcessState)
}
