package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

func TestLossReason(t *testing.T) {
	running := &electionRun{done: make(chan struct{})}
	stopped := &electionRun{done: make(chan struct{}), err: errors.New("sqlite: " + backend.ErrStoreLost.Error())}
	close(stopped.done)
	leading := election.Status{Leader: true, Identity: "me", Holder: "me", Token: 4}
	cases := []struct {
		name    string
		st      election.Status
		e       *electionRun
		mention string // "" for not lost
	}{
		{"still leading the term", leading, running, ""},
		{"a new term of its own", election.Status{Leader: true, Identity: "me", Holder: "me", Token: 5}, running, "a new term began (token 5)"},
		{"another holder", election.Status{Identity: "me", Holder: "you"}, running, "the record now names you"},
		{"the claim lapsed", election.Status{Identity: "me", Holder: "me"}, running, "the claim lapsed"},
		{"released or removed", election.Status{Identity: "me"}, running, "the record was released or removed"},
		{"the store was lost", leading, stopped, "the election stopped: sqlite: " + backend.ErrStoreLost.Error()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := lossReason(c.st, 4, c.e)
			if (c.mention == "") != (got == "") || !strings.Contains(got, c.mention) {
				t.Fatalf("lossReason = %q, want %q", got, c.mention)
			}
		})
	}
}
