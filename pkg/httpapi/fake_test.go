package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// fakeElector is a scripted Elector. Like the real one, it stops reporting
// leadership once ValidUntil has passed.
type fakeElector struct {
	mu         sync.Mutex
	status     election.Status
	changed    chan struct{}
	healthy    bool
	releaseErr error
	releases   int
}

func newFake(s election.Status) *fakeElector {
	return &fakeElector{status: s, changed: make(chan struct{}), healthy: true}
}

func leading(token int64, validFor time.Duration) election.Status {
	return election.Status{Leader: true, Identity: "me_1", Holder: "me_1", Token: token,
		ValidUntil: time.Now().Add(validFor), ReachedStore: true}
}

func following(holder string) election.Status {
	return election.Status{Identity: "me_1", Holder: holder, ReachedStore: true}
}

func (f *fakeElector) Status() election.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.status
	if s.Leader && !time.Now().Before(s.ValidUntil) {
		s.Leader, s.Token, s.ValidUntil = false, 0, time.Time{}
	}
	return s
}

func (f *fakeElector) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *fakeElector) set(s election.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = s
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeElector) Release(context.Context) (election.Status, error) {
	f.mu.Lock()
	f.releases++
	err := f.releaseErr
	f.mu.Unlock()
	f.set(following(""))
	return f.Status(), err
}

func (f *fakeElector) Healthy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.healthy
}
