package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func probe(t *testing.T, environ []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runProbe(t.Context(), process{environ: environ, stdout: &out, stderr: &errOut}, args)
	return code, out.String(), errOut.String()
}

func TestProbe(t *testing.T) {
	serve := func(name string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/leader/ready" {
				http.Error(w, name+": not leader", http.StatusServiceUnavailable)
				return
			}
			w.Write([]byte(name + ": " + r.URL.Path))
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	addr, ops := serve("app"), serve("ops")
	both := []string{"LEADER_SIDECAR_OPS_ADDRESS=" + ops, "LEADER_SIDECAR_HTTP_ADDRESS=" + addr}

	cases := []struct {
		name           string
		env            []string
		args           []string
		code           int
		stdout, stderr string // what each contains ("" for stdout: empty)
	}{
		{"2xx: the body alone on stdout", nil, []string{"--address", addr, "/healthz"}, 0, "app: /healthz\n", ""},
		{"503: the body on stdout, the status on stderr", nil, []string{"--address", addr, "/leader/ready"}, 1, "app: not leader\n", "503 Service Unavailable"},
		{"a probe path goes to the ops listener", both, []string{"/leader/ready"}, 1, "ops: not leader\n", "503"},
		{"/healthz goes to the ops listener", both, []string{"/healthz"}, 0, "ops: /healthz\n", ""},
		{"/leader goes to the app listener", both, []string{"/leader"}, 0, "app: /leader\n", ""},
		{"/ goes to the app listener", both, []string{"/"}, 0, "app: /\n", ""},
		{"--address wins", both, []string{"--address", ops, "/leader"}, 0, "ops: /leader\n", ""},
		{"the ops listener from its variable", []string{"LEADER_SIDECAR_OPS_ADDRESS=" + ops}, []string{"/healthz"}, 0, "ops: /healthz\n", ""},
		{"nothing listening", nil, []string{"--address", "127.0.0.1:1", "/healthz"}, 1, "", "connection refused"},
		{"no path", nil, []string{"--address", addr}, 2, "", "want exactly one path"},
		{"relative path", nil, []string{"--address", addr, "healthz"}, 2, "", "want exactly one path"},
		{"bad address", nil, []string{"--address", "nowhere", "/healthz"}, 2, "", "--address: must be host:port"},
		{"bad timeout", nil, []string{"--timeout", "0s", "/healthz"}, 2, "", "--timeout: must be greater than 0"},
		{"unknown flag", nil, []string{"--port", "1", "/healthz"}, 2, "", "unknown flag: --port"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := probe(t, c.env, c.args...)
			if code != c.code || stdout != c.stdout || !strings.Contains(stderr, c.stderr) || (c.stderr == "" && stderr != "") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, stdout %q, stderr with %q", code, stdout, stderr, c.code, c.stdout, c.stderr)
			}
		})
	}
}
