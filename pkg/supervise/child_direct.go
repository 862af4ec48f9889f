//go:build !linux

package supervise

import (
	"fmt"
	"os"
)

// Start starts CMD as a child of the lock itself: without a parent-death
// signal a guardian could not learn of the lock's death either. It returns
// once CMD runs, or with a *CommandError if CMD could not start.
func Start(cmd Command) (*Child, error) {
	return startCommand(cmd.Path, cmd.Args, cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr)
}

// RunGuardian refuses: only on Linux does the lock start a guardian.
func RunGuardian([]string) int {
	fmt.Fprintf(os.Stderr, "sidecar: %v\n", errNotForUse)
	return 2
}
