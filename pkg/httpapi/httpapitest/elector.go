// Package httpapitest provides a scripted elector for tests of code that
// serves or reads the sidecar's HTTP API.
package httpapitest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// Elector is a scripted httpapi.Elector. Like the real one, it stops
// claiming leadership once ValidUntil has passed. Release and Handoff step
// it down.
type Elector struct {
	mu         sync.Mutex
	status     election.Status
	changed    chan struct{}
	unhealthy  bool
	releaseErr error
	releases   int
	handoffErr error
	handoffs   []string
}

// NewElector returns an Elector reporting s.
func NewElector(s election.Status) *Elector {
	return &Elector{status: s, changed: make(chan struct{})}
}

// Leading is the status of identity leading with token until validFor
// from now.
func Leading(identity string, token int64, validFor time.Duration) election.Status {
	return election.Status{Leader: true, Identity: identity, Holder: identity, Token: token,
		ValidUntil: time.Now().Add(validFor), ReachedStore: true}
}

// Following is the status of identity following holder.
func Following(identity, holder string) election.Status {
	return election.Status{Identity: identity, Holder: holder, ReachedStore: true}
}

// Status implements httpapi.Elector.
func (e *Elector) Status() election.Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.status
	if s.Leader && !time.Now().Before(s.ValidUntil) {
		s.Leader, s.Token, s.ValidUntil = false, 0, time.Time{}
	}
	return s
}

// Changed implements httpapi.Elector.
func (e *Elector) Changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

// Set changes the status and wakes every Changed waiter.
func (e *Elector) Set(s election.Status) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status = s
	close(e.changed)
	e.changed = make(chan struct{})
}

// Release implements httpapi.Elector. Like the real one, it refuses a
// candidate that neither leads nor holds the record: it returns an error
// wrapping election.ErrNotLeader and changes nothing. Otherwise it counts
// the release, steps down to a follower of no one, and returns the error
// set by SetReleaseError.
func (e *Elector) Release(context.Context) (election.Status, error) {
	e.mu.Lock()
	if !e.status.Leader && e.status.Holder != e.status.Identity {
		holder := e.status.Holder
		e.mu.Unlock()
		return e.Status(), fmt.Errorf("%w: nothing to release (the record names %q)", election.ErrNotLeader, holder)
	}
	e.releases++
	err, identity := e.releaseErr, e.status.Identity
	e.mu.Unlock()
	e.Set(Following(identity, ""))
	return e.Status(), err
}

// Releases is how many releases Release made (refused ones do not count).
func (e *Elector) Releases() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.releases
}

// SetReleaseError makes Release return err.
func (e *Elector) SetReleaseError(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.releaseErr = err
}

// Healthy implements httpapi.Elector; true unless SetHealthy(false).
func (e *Elector) Healthy() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.unhealthy
}

// SetHealthy sets what Healthy answers.
func (e *Elector) SetHealthy(h bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.unhealthy = !h
}

// Handoff implements httpapi.Elector. Like the real one, it refuses a
// candidate that does not lead with an error wrapping
// election.ErrNotLeader and changes nothing; with an error set by
// SetHandoffError it returns that error and changes nothing either.
// Otherwise it records to and becomes a follower of to (or of "standby"
// when to is empty).
func (e *Elector) Handoff(_ context.Context, to string) (election.Status, error) {
	s := e.Status()
	if !s.Leader {
		return s, fmt.Errorf("%w: nothing to hand off (the record names %q)", election.ErrNotLeader, s.Holder)
	}
	e.mu.Lock()
	err := e.handoffErr
	if err == nil {
		e.handoffs = append(e.handoffs, to)
	}
	e.mu.Unlock()
	if err != nil {
		return e.Status(), err
	}
	holder := to
	if holder == "" {
		holder = "standby"
	}
	e.Set(Following(s.Identity, holder))
	return e.Status(), nil
}

// Handoffs is the target of every hand-off Handoff made, in order.
func (e *Elector) Handoffs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.handoffs...)
}

// SetHandoffError makes Handoff on a leader return err and change nothing.
func (e *Elector) SetHandoffError(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.handoffErr = err
}
