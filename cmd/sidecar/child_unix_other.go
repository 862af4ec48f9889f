//go:build unix && !linux

package main

import "syscall"

// dieWithTheLock does nothing: only Linux has a parent-death signal, so
// elsewhere CMD runs on if sidecar lock itself is killed.
func dieWithTheLock(*syscall.SysProcAttr) {}
