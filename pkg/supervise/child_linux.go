//go:build linux

package supervise

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// dieWithTheStarter makes the kernel send CMD SIGKILL when the thread that
// started it ends, which startCommand keeps alive until CMD has exited. It
// reaches CMD alone, not the processes CMD started (PR_SET_PDEATHSIG is
// not inherited): the guardian kills those (see guardian_linux.go).
func dieWithTheStarter(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// killGroupBeforeReaping waits until process pid, a child of this process
// leading its own group, has exited, without reaping it, and then kills
// what is left of its group. A process not yet reaped keeps its pid, so
// the group's id names no other group meanwhile. It reports whether it
// killed the group.
func killGroupBeforeReaping(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return false
		}
		killGroup(pid)
		return true
	}
}
