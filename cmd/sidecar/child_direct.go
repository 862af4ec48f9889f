//go:build !linux

package main

import (
	"fmt"
	"os"
)

// startChild starts CMD with env, on the process's standard streams, as a
// child of the lock itself: without a parent-death signal a guardian could
// not learn of the lock's death either.
func startChild(cfg lockConfig, p process, env []string) (*child, error) {
	return startCommand(cfg.path, cfg.command, env, p.stdin, p.stdout, p.stderr)
}

// runGuardian refuses: only on Linux does the lock start a guardian.
func runGuardian([]string) int {
	fmt.Fprintf(os.Stderr, "sidecar: %v\n", errNotForUse)
	return 2
}
