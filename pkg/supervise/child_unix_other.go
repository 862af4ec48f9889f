//go:build unix && !linux

package supervise

import "syscall"

// dieWithTheStarter does nothing: only Linux has a parent-death signal,
// so elsewhere CMD and what it started run on if sidecar lock itself is
// killed.
func dieWithTheStarter(*syscall.SysProcAttr) {}

// killGroupBeforeReaping does nothing: the lock kills what CMD left once
// CMD is reaped (killLeftovers).
func killGroupBeforeReaping(int) bool { return false }
