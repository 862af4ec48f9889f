package main

import (
	"strings"
	"testing"
	"time"
)

func TestAppHealthFlags(t *testing.T) {
	bad := []struct {
		args, env []string
		want      string
	}{
		{[]string{"--app-health-url", "127.0.0.1:8080/healthz"}, nil, "--app-health-url: must be an http:// or https:// URL"},
		{[]string{"--app-health-url", "ftp://127.0.0.1/x"}, nil, "--app-health-url: must be an http:// or https:// URL"},
		{[]string{"--app-health-url", "http://10.0.0.7:8080/healthz"}, nil, "--app-health-url: must name a loopback host"},
		{[]string{"--app-health-url", "http://127.1/healthz"}, nil, `--app-health-url: "127.1" is the short form of 127.0.0.1, which the sidecar does not resolve: write 127.0.0.1`},
		{nil, []string{"LEADER_SIDECAR_APP_HEALTH_URL=http://example.com/healthz"}, "--app-health-url: must name a loopback host"},
		{[]string{"--app-health-url", "http://127.0.0.1:4040/leader/ready"}, nil, "--app-health-url: port 4040 is this sidecar's own listener"},
		{[]string{"--ops-address", ":8081", "--app-health-url", "http://localhost:8081/readyz"}, nil, "--app-health-url: port 8081 is this sidecar's own listener"},
		{[]string{"--ops-address", ":8081", "--app-health-url", "http://localhost:08081/readyz"}, nil, "--app-health-url: port 8081 is this sidecar's own listener"},
		{[]string{"--app-health-url", "http://127.0.0.1:99999/healthz"}, nil, `--app-health-url: port "99999" is not a port number from 1 to 65535`},
		{[]string{"--app-health-url", "http://127.0.0.1:0/healthz"}, nil, `--app-health-url: port "0" is not a port number from 1 to 65535`},
		{[]string{"--app-health-url", "http://127.0.0.1:8080/", "--app-health-period", "0s"}, nil, "--app-health-period: must be greater than 0"},
		{[]string{"--app-health-url", "http://127.0.0.1:8080/", "--app-health-failures", "0"}, nil, "--app-health-failures: must be at least 1"},
		{[]string{"--app-health-url", "http://127.0.0.1:8080/", "--app-health-timeout", "-1s"}, nil, "--app-health-timeout: must be greater than 0"},
	}
	for _, c := range bad {
		code, _, stderr := runArgs(t, c.args, c.env...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v %v: exit %d, stderr %q; want 2 and one line with %q", c.args, c.env, code, stderr, c.want)
		}
	}

	cfg := sidecarConfigOf(t, []string{"--app-health-url", "http://[::1]:8080/healthz"},
		[]string{"LEADER_SIDECAR_APP_HEALTH_PERIOD=5s", "LEADER_SIDECAR_APP_HEALTH_FAILURES=2"})
	want := appHealthConfig{url: "http://[::1]:8080/healthz", period: 5 * time.Second, failures: 2, timeout: time.Second}
	if cfg.appHealth != want {
		t.Fatalf("config %+v, want %+v", cfg.appHealth, want)
	}
	if cfg := sidecarConfigOf(t, nil, nil); cfg.appHealth.url != "" {
		t.Fatalf("an app health URL by default: %q", cfg.appHealth.url)
	}
}
