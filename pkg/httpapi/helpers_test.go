package httpapi

import (
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi/httpapitest"
)

// fakeElector is the scripted elector these tests drive.
type fakeElector = httpapitest.Elector

func newFake(s election.Status) *fakeElector { return httpapitest.NewElector(s) }

func leading(token int64, validFor time.Duration) election.Status {
	return httpapitest.Leading("me_1", token, validFor)
}

func following(holder string) election.Status { return httpapitest.Following("me_1", holder) }
