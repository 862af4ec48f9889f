//go:build unix

package supervise

import (
	"os"
	"os/exec"
	"syscall"
)

// sigCont continues a stopped process.
const sigCont = syscall.SIGCONT

// supervisedProcess puts CMD in a process group of its own and, where the
// system offers it (Linux), has the kernel kill CMD when the thread that
// started it ends.
func supervisedProcess(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithTheStarter(cmd.SysProcAttr)
}

// signalGroup signals the process group CMD leads (its pgid is its pid).
func signalGroup(pid int, sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		s = syscall.SIGTERM
	}
	_ = syscall.Kill(-pid, s)
}

func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		return waitStatusExit(ws)
	}
	return ps.ExitCode()
}

// waitStatusExit is the exit status of a process that ended with ws, or
// 128+n if signal n killed it, as a shell reports it.
func waitStatusExit(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
