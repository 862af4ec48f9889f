//go:build !unix

package supervise

import (
	"os"
	"os/exec"
	"syscall"
)

// Without process groups, signals reach CMD alone.

// sigCont is none: without job control no process is stopped.
const sigCont = syscall.Signal(0)

func supervisedProcess(*exec.Cmd) {}

func signalGroup(pid int, sig os.Signal) {
	p, err := os.FindProcess(pid)
	if err != nil {
		return
	}
	if p.Signal(sig) != nil {
		_ = p.Kill()
	}
}

func killGroup(int) {}

func killGroupBeforeReaping(int) bool { return false }

func exitStatus(ps *os.ProcessState) int {
	return ps.ExitCode()
}
