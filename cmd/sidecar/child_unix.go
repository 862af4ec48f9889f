//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// supervisedProcess puts CMD in a process group of its own and, where the
// system offers it (Linux), has the kernel kill CMD when the lock dies.
func supervisedProcess(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithTheLock(cmd.SysProcAttr)
}

// signalGroup signals the process group CMD leads (its pgid is its pid).
func signalGroup(p *os.Process, sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(-p.Pid, s)
		return
	}
	_ = p.Signal(sig)
}

func killGroup(p *os.Process) {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
}

func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
