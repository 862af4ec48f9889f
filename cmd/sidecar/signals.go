package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// stopSignals are the signals that stop every command: SIGTERM (kill,
// Kubernetes, timeout), SIGINT (Ctrl-C) and SIGHUP (a closed terminal, a
// dropped ssh session).
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}

// repeatWindow is how soon after a signal the same signal again counts as
// the same one. GNU timeout, and a shell killing a job's process group,
// send a signal to the process and then to its whole process group, which
// the process is in too: it gets the signal twice within microseconds,
// and must not take the second for a user's "stop now".
const repeatWindow = 200 * time.Millisecond

// notifyStopSignals delivers stopSignals as they arrive, a repeat of one
// within repeatWindow dropped.
func notifyStopSignals() <-chan os.Signal {
	raw := make(chan os.Signal, 4)
	signal.Notify(raw, stopSignals...)
	return withoutRepeats(raw, repeatWindow)
}

// withoutRepeats passes on the signals of in, except one that repeats the
// signal passed on last within window. It closes its channel when in is
// closed.
func withoutRepeats(in <-chan os.Signal, window time.Duration) <-chan os.Signal {
	out := make(chan os.Signal, cap(in))
	go func() {
		defer close(out)
		var last os.Signal
		var lastAt time.Time
		for sig := range in {
			now := time.Now()
			if sig == last && now.Sub(lastAt) < window {
				continue
			}
			last, lastAt = sig, now
			out <- sig
		}
	}()
	return out
}

// cancelOnSignal is ctx, cancelled too when a signal arrives on signals:
// a command that makes requests stops them on the first stop signal.
func cancelOnSignal(ctx context.Context, signals <-chan os.Signal) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-signals:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
