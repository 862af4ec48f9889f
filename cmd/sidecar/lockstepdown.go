package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// A step-down is POST /leader/release or POST /leader/handoff on the
// lock's app API. It goes through the locker, never straight to the
// elector: while CMD runs, the locker stops CMD first (SIGTERM, SIGKILL
// after --kill-grace, what is left of its group killed and reaped), and
// only then releases or hands off, so another candidate can never lead
// while CMD still runs.

// stepDown is one request to release or hand off.
type stepDown struct {
	handoff bool
	to      string // the hand-off's target; "" for any candidate
	answer  chan stepDownAnswer
}

type stepDownAnswer struct {
	st  election.Status
	err error
}

// what names the step-down in logs.
func (s *stepDown) what() string {
	if s.handoff {
		return "POST /leader/handoff"
	}
	return "POST /leader/release"
}

func (s *stepDown) reply(st election.Status, err error) {
	s.answer <- stepDownAnswer{st, err}
}

// perform releases or hands off. A hand-off that fails while this
// candidate still leads is followed by a release: CMD has been stopped,
// and the lock exits.
func (s *stepDown) perform(ctx context.Context, e *election.Elector) (election.Status, error) {
	if !s.handoff {
		return e.Release(ctx)
	}
	st, err := e.Handoff(ctx, s.to)
	if err == nil || !e.Status().Leader {
		return st, err
	}
	st, rerr := e.Release(ctx)
	if rerr != nil {
		return st, fmt.Errorf("%w; the command was stopped, and releasing the lease failed too: %v", err, rerr)
	}
	return st, fmt.Errorf("%w; the command was stopped, so the lease was released instead", err)
}

// stepDownGate hands the step-downs of the app API to the locker.
type stepDownGate struct {
	requests chan *stepDown
	// finished is closed once CMD has exited and what it left is killed,
	// or once it is known that CMD will not run: step-downs then go
	// straight to the elector.
	finished chan struct{}
	once     sync.Once
}

func newStepDownGate() *stepDownGate {
	return &stepDownGate{requests: make(chan *stepDown), finished: make(chan struct{})}
}

// finish lets later step-downs go straight to the elector.
func (g *stepDownGate) finish() { g.once.Do(func() { close(g.finished) }) }

// lockElector is the elector as the lock's app API sees it: Release and
// Handoff are routed through the locker.
type lockElector struct {
	*election.Elector
	gate *stepDownGate
}

func (e lockElector) Release(ctx context.Context) (election.Status, error) {
	return e.stepDown(ctx, &stepDown{})
}

func (e lockElector) Handoff(ctx context.Context, to string) (election.Status, error) {
	return e.stepDown(ctx, &stepDown{handoff: true, to: to})
}

func (e lockElector) stepDown(ctx context.Context, s *stepDown) (election.Status, error) {
	s.answer = make(chan stepDownAnswer, 1) // the locker never waits for the handler
	select {
	case e.gate.requests <- s:
	case <-e.gate.finished:
		return s.perform(ctx, e.Elector)
	case <-ctx.Done():
		return e.Status(), ctx.Err()
	}
	select {
	case a := <-s.answer:
		return a.st, a.err
	case <-ctx.Done():
		return e.Status(), fmt.Errorf("%s: %w (the command is being stopped, then the lease is released or handed off)", s.what(), ctx.Err())
	}
}

// errStepDownUnderWay refuses a second step-down while the first one
// stops CMD.
var errStepDownUnderWay = errors.New("a release or hand-off is already stopping the command")
