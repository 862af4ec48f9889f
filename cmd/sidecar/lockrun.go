package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// electionRun is the elector's Run in its goroutine.
type electionRun struct {
	done chan struct{}
	err  error // what Run returned; read it after done is closed
}

// run takes part in the election, runs CMD once while leading, and
// returns the exit status. ctx ending counts as a SIGTERM.
func (l *locker) run(ctx context.Context) int {
	// The election stops only when run says so, never on a signal, so the
	// lease is never released while CMD may still run.
	runCtx, stopElection := context.WithCancel(context.Background())
	e := &electionRun{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		e.err = l.elector.Run(runCtx)
	}()
	for _, s := range l.servers {
		go func() { _ = s.serve() }()
	}
	defer func() {
		l.stepDowns.finish()
		stopElection()
		<-e.done // stopped claiming, and released if it held the record
		l.shutdownServers()
	}()

	st, status, leading := l.awaitLeadership(ctx, e)
	if !leading {
		return status
	}
	c, err := startChild(l.cfg, l.p, commandEnv(l.p.environ, st, l.lease))
	if err != nil {
		l.log.Error("cannot run the command", "err", err)
		var ce *commandError
		if errors.As(err, &ce) {
			return ce.exitStatus()
		}
		return 126
	}
	l.log.Info("leading: running the command", "token", st.Token, "pid", c.pid)
	lost, stepped := l.supervise(ctx, c, st.Token, e)
	c.killLeftovers()
	l.stepDowns.finish()
	status = c.exitStatus()
	switch {
	case lost != "":
		l.log.Error("leadership was lost while the command ran; exiting 1", "reason", lost, "command status", status)
		return 1
	case stepped != "":
		l.log.Info("the command was stopped and leadership given up", "reason", stepped, "command status", status)
		return status
	}
	l.log.Info("the command exited; releasing the lease", "status", status)
	return status
}

// exitNotLed is the exit status when the lock gave up before it led
// (--timeout, --nonblock), as timeout(1) exits when its command timed out.
const exitNotLed = 124

// awaitLeadership waits until this candidate leads. If it never does (the
// election stops, a signal, ctx ends, --timeout passes, or --nonblock sees
// another holder) it returns leading false and the exit status.
func (l *locker) awaitLeadership(ctx context.Context, e *electionRun) (st election.Status, status int, leading bool) {
	l.log.Info("waiting to lead", "timeout", l.cfg.timeout, "nonblock", l.cfg.nonblock)
	var giveUp <-chan time.Time
	if l.cfg.timeout > 0 {
		timer := time.NewTimer(l.cfg.timeout)
		defer timer.Stop()
		giveUp = timer.C
	}
	for {
		changed := l.elector.Changed()
		st := l.elector.Status()
		if st.Leader {
			return st, 0, true
		}
		if l.cfg.nonblock && st.Holder != "" && st.Holder != st.Identity {
			l.log.Info("another candidate holds the lock; not running the command (--nonblock)", "holder", st.Holder)
			return st, exitNotLed, false
		}
		select {
		case <-giveUp:
			l.log.Info("did not lead within --timeout; not running the command", "timeout", l.cfg.timeout, "holder", st.Holder)
			return st, exitNotLed, false
		case <-changed:
		case <-e.done:
			l.log.Error("the election stopped before this candidate led; not running the command", "err", e.err)
			return st, 1, false
		case sig := <-l.p.signals:
			l.log.Info("signal before leading; not running the command", "signal", sig)
			return st, 128 + signalNumber(sig), false
		case req := <-l.stepDowns.requests:
			// No CMD runs yet: nothing to stop first.
			req.reply(req.perform(ctx, l.elector))
		case <-ctx.Done():
			return st, 128 + int(syscall.SIGTERM), false
		}
	}
}

// supervise watches the claim while CMD runs, passes signals on to it,
// and stops it if leadership is lost or the app API asks for a release or
// a hand-off: SIGTERM, then SIGKILL after --kill-grace. It returns once
// CMD has exited, with why leadership was lost ("" if it was not), and
// what the lock did on request after CMD had exited, what is left of its
// group killed ("" if nothing was asked).
func (l *locker) supervise(ctx context.Context, c *child, token int64, e *electionRun) (lost, stepped string) {
	var (
		pending  *stepDown // the release or hand-off waiting for CMD to exit
		stopping bool      // SIGTERM sent, SIGKILL due at kill
		kill     <-chan time.Time
	)
	stop := func() {
		if !stopping {
			stopping = true
			c.signal(syscall.SIGTERM)
			kill = time.After(l.cfg.killGrace)
		}
	}
	electionDone, ctxDone := e.done, ctx.Done()
	for {
		changed := l.elector.Changed()
		var lapse <-chan time.Time
		if lost == "" {
			st := l.elector.Status()
			if lost = lossReason(st, token, e); lost != "" {
				l.log.Error("leadership lost: stopping the command", "reason", lost, "kill grace", l.cfg.killGrace)
				stop()
			} else {
				// The claim ends at ValidUntil unless a renewal moves it
				// (which closes changed): look again then.
				lapse = time.After(max(time.Until(st.ValidUntil), time.Millisecond))
			}
		}
		select {
		case <-c.done:
			if pending == nil {
				return lost, ""
			}
			if lost != "" {
				pending.reply(l.elector.Status(), fmt.Errorf("%w: leadership was lost while the command was being stopped (%s)", election.ErrNotLeader, lost))
				return lost, ""
			}
			c.killLeftovers()
			return "", l.performStepDown(pending)
		case req := <-l.stepDowns.requests:
			switch {
			case lost != "":
				req.reply(l.elector.Status(), fmt.Errorf("%w: leadership was lost (%s); the command is being stopped", election.ErrNotLeader, lost))
			case pending != nil:
				req.reply(l.elector.Status(), errStepDownUnderWay)
			default:
				pending = req
				l.log.Info("stopping the command before giving up leadership", "request", req.what(), "kill grace", l.cfg.killGrace)
				stop()
			}
		case <-changed:
		case <-lapse:
		case <-electionDone:
			electionDone = nil
		case sig := <-l.p.signals:
			l.log.Info("passing the signal on to the command", "signal", sig)
			c.signal(sig)
		case <-ctxDone:
			ctxDone = nil
			c.signal(syscall.SIGTERM)
		case <-kill:
			kill = nil
			l.log.Error("the command outlived --kill-grace: SIGKILL", "kill grace", l.cfg.killGrace)
			c.signal(syscall.SIGKILL)
		}
	}
}

// performStepDown releases or hands off once CMD is gone, answers the
// request, and says what was done. The writes get their own time (the
// asker may have given up meanwhile): a lease left held would make the
// next candidate wait it out.
func (l *locker) performStepDown(req *stepDown) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*l.cfg.election.renewDeadline)
	defer cancel()
	st, err := req.perform(ctx, l.elector)
	req.reply(st, err)
	switch {
	case err != nil:
		l.log.Warn("the command was stopped, but the step-down failed", "request", req.what(), "err", err)
		return fmt.Sprintf("stopped for %s, which failed: %v", req.what(), err)
	case req.handoff:
		return "handed off to " + st.Holder + " (" + req.what() + ")"
	default:
		return "released (" + req.what() + ")"
	}
}

// lossReason says why the term token is over, or "" if st still claims it.
func lossReason(st election.Status, token int64, e *electionRun) string {
	select {
	case <-e.done:
		return fmt.Sprintf("the election stopped: %v", e.err)
	default:
	}
	switch {
	case st.Leader && st.Token == token:
		return ""
	case st.Leader:
		return fmt.Sprintf("a new term began (token %d)", st.Token)
	case st.Holder != "" && st.Holder != st.Identity:
		return "the record now names " + st.Holder
	case st.Holder == "":
		// A release or hand-off asked of this lock stops CMD first and
		// is logged as such: this one came from elsewhere.
		return "the record was released or removed under this lock"
	default:
		return "the claim lapsed: no successful renewal within --renew-deadline"
	}
}

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return int(syscall.SIGTERM)
}

func (l *locker) shutdownServers() {
	close(l.streamsDone)
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	for _, s := range l.servers {
		_ = s.srv.Shutdown(ctx)
	}
}
