//go:build !linux

package supervise

import (
	"fmt"
	"os"
	"time"
)

// Start starts CMD as a child of the lock itself, the claim ending at
// validUntil: without a parent-death signal a guardian could not learn of
// the lock's death either, so the claim is enforced by a goroutine of the
// lock (see claim.go), which stops with the lock. It returns once CMD
// runs, or with a *CommandError if CMD could not start, or ErrClaimEnded.
func Start(cmd Command, validUntil time.Time) (*Child, error) {
	if !time.Now().Before(validUntil) {
		return nil, ErrClaimEnded
	}
	c, err := startCommand(cmd.Path, cmd.Args, cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr)
	if err != nil {
		return nil, err
	}
	orders := make(chan order, 16)
	c.tell = func(o order) {
		select {
		case orders <- o:
		case <-c.done:
		}
	}
	e := &enforcer{
		grace:  cmd.KillGrace,
		signal: c.signalUnlessReaped,
		report: func(ev event) { c.noteEvent(cmd.Log, ev, cmd.KillGrace) },
	}
	go e.run(validUntil, orders, c.done)
	return c, nil
}

// RunGuardian refuses: only on Linux does the lock start a guardian.
func RunGuardian([]string) int {
	fmt.Fprintf(os.Stderr, "sidecar: %v\n", errNotForUse)
	return 2
}
