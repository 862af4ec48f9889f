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
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/leader/ready" {
			http.Error(w, "not leader", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	cases := []struct {
		name    string
		env     []string
		args    []string
		code    int
		mention string
	}{
		{"2xx", nil, []string{"--address", addr, "/healthz"}, 0, "200 OK ok"},
		{"503", nil, []string{"--address", addr, "/leader/ready"}, 1, "503 Service Unavailable not leader"},
		{"address from the ops listener's variable", []string{"LEADER_SIDECAR_OPS_ADDRESS=" + addr}, []string{"/healthz"}, 0, "200 OK"},
		{"nothing listening", nil, []string{"--address", "127.0.0.1:1", "/healthz"}, 1, "connection refused"},
		{"no path", nil, []string{"--address", addr}, 2, "want exactly one path"},
		{"relative path", nil, []string{"--address", addr, "healthz"}, 2, "want exactly one path"},
		{"bad address", nil, []string{"--address", "nowhere", "/healthz"}, 2, "--address: must be host:port"},
		{"bad timeout", nil, []string{"--timeout", "0s", "/healthz"}, 2, "--timeout: must be greater than 0"},
		{"unknown flag", nil, []string{"--port", "1", "/healthz"}, 2, "unknown flag: --port"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := probe(t, c.env, c.args...)
			if code != c.code || !strings.Contains(stdout+stderr, c.mention) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d mentioning %q", code, stdout, stderr, c.code, c.mention)
			}
		})
	}
}

func TestDialable(t *testing.T) {
	for in, want := range map[string]string{
		":8081":          "127.0.0.1:8081",
		"0.0.0.0:8081":   "127.0.0.1:8081",
		"[::]:8081":      "127.0.0.1:8081",
		"10.1.2.3:8081":  "10.1.2.3:8081",
		"localhost:4040": "localhost:4040",
	} {
		if got := dialable(in); got != want {
			t.Errorf("dialable(%q) = %q, want %q", in, got, want)
		}
	}
}
