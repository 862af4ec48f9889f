package main

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi/httpapitest"
)

func handoffCmd(t *testing.T, environ []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runHandoff(t.Context(), process{environ: environ, stdout: &out, stderr: &errOut}, args)
	return code, out.String(), errOut.String()
}

// appAPI serves the real app API for e on a loopback port.
func appAPI(t *testing.T, e httpapi.Elector) string {
	t.Helper()
	srv := httptest.NewServer(httpapi.NewAppHandler(e, httpapi.Info{Lease: "l", Backend: "sqlite"}, httpapi.Options{}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestHandoffCommand(t *testing.T) {
	cases := []struct {
		name    string
		status  election.Status
		err     error
		args    []string
		code    int
		mention string
		sent    []string // the targets the sidecar was asked for
	}{
		{"to a Pod", httpapitest.Leading("web-0_1", 3, time.Minute), nil,
			[]string{"--to", "web-1"}, 0, "handed off: web-1 leads now", []string{"web-1"}},
		{"to anyone", httpapitest.Leading("web-0_1", 3, time.Minute), nil,
			nil, 0, "handed off: standby leads now", []string{""}},
		{"on a standby", httpapitest.Following("web-1_2", "web-0_1"), nil,
			[]string{"--to", "web-2"}, 1, "409 Conflict: not the leader", nil},
		{"nobody takes it", httpapitest.Leading("web-0_1", 3, time.Minute),
			fmt.Errorf("%w: candidate %q did not answer within 1s", election.ErrNoTaker, "web-9"),
			[]string{"--to", "web-9"}, 1, `422 Unprocessable Entity: no candidate accepted the hand-off: candidate "web-9" did not answer`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := httpapitest.NewElector(c.status)
			e.SetHandoffError(c.err)
			addr := appAPI(t, e)
			code, stdout, stderr := handoffCmd(t, nil, append([]string{"--address", addr}, c.args...)...)
			if code != c.code || !strings.Contains(stdout+stderr, c.mention) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d mentioning %q", code, stdout, stderr, c.code, c.mention)
			}
			if got := e.Handoffs(); !slices.Equal(got, c.sent) {
				t.Fatalf("the sidecar was asked to hand off to %q, want %q", got, c.sent)
			}
		})
	}
}

func TestHandoffCommandFindsTheAppListenerInItsEnvironment(t *testing.T) {
	e := httpapitest.NewElector(httpapitest.Leading("web-0_1", 3, time.Minute))
	addr := appAPI(t, e)
	code, stdout, stderr := handoffCmd(t, []string{"LEADER_SIDECAR_HTTP_ADDRESS=" + addr, "LEADER_SIDECAR_OPS_ADDRESS=127.0.0.1:1"}, "--to", "web-1")
	if code != 0 || !slices.Equal(e.Handoffs(), []string{"web-1"}) {
		t.Fatalf("exit %d, stdout %q, stderr %q, hand-offs %q", code, stdout, stderr, e.Handoffs())
	}
}

func TestHandoffCommandBadUsage(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		code    int
		mention string
	}{
		{"a bare target", []string{"web-1"}, 2, `unexpected argument "web-1": name the target with --to`},
		{"bad address", []string{"--address", "nowhere"}, 2, "--address: must be host:port"},
		{"bad timeout", []string{"--timeout", "0s"}, 2, "--timeout: must be greater than 0"},
		{"unknown flag", []string{"--target", "web-1"}, 2, "unknown flag: --target"},
		{"nothing listening", []string{"--address", "127.0.0.1:1"}, 1, "connection refused"},
		{"help", []string{"--help"}, 0, "Exit status: 0 once another candidate holds the lease"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := handoffCmd(t, nil, c.args...)
			if code != c.code || !strings.Contains(stdout+stderr, c.mention) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d mentioning %q", code, stdout, stderr, c.code, c.mention)
			}
		})
	}
}
