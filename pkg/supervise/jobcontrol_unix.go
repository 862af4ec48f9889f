//go:build unix

package supervise

import (
	"os"
	"os/signal"
	"syscall"
)

// Job control: a terminal's Ctrl-Z sends SIGTSTP to its foreground process
// group, which holds the lock but neither the guardian nor CMD (each in a
// group of its own). The lock passes SIGTSTP on to CMD's group and then
// stops itself, so the shell sees its job stopped and the user gets the
// prompt back, CMD suspended with it; fg or bg (SIGCONT to the lock) is
// passed on too, and CMD runs on with the lock. A lock stopped longer than
// what is left of its claim has lost it: the guardian stops CMD at the
// claim's end (SIGTERM, then SIGCONT so that it acts on it, SIGKILL after
// the kill grace), and the lock, continued, finds leadership lost.

// NotifyJobControl delivers SIGTSTP and SIGCONT, sent to this process,
// on signals until stop is called; until then SIGTSTP no longer stops the
// process by itself (see Child.PassJobControl).
func NotifyJobControl() (signals <-chan os.Signal, stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTSTP, syscall.SIGCONT)
	return ch, func() { signal.Stop(ch) }
}

// PassJobControl passes sig, one of NotifyJobControl's, on to CMD's group;
// after SIGTSTP it stops this process too (SIGSTOP), as the whole job is
// suspended. A process that is PID 1 of its namespace cannot be stopped
// by itself: it runs on, CMD suspended.
func (c *Child) PassJobControl(sig os.Signal) {
	c.Signal(sig)
	if sig == syscall.SIGTSTP {
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	}
}
