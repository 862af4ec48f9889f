package main

import (
	"os"
	"os/exec"
	"time"
)

// child is CMD of sidecar lock, running in a process group of its own so
// that a signal reaches everything it started (the commands of a shell
// script too), not the shell alone.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when CMD has exited and been reaped
}

// startChild starts CMD with env, on the process's standard streams.
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
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, &commandError{err}
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the status is read from ProcessState
		close(c.done)
	}()
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
