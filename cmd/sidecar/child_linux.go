//go:build linux

package main

import "syscall"

// dieWithTheLock makes the kernel send CMD SIGKILL when the thread that
// started it ends, which startChild keeps alive until CMD has exited: so
// when sidecar lock itself dies (SIGKILL, the OOM killer, a crash), CMD
// dies with it instead of running on unsupervised. It reaches CMD alone,
// not the processes CMD started (PR_SET_PDEATHSIG is not inherited).
func dieWithTheLock(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
