package process

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestProbeInTheChartsEnvironment: in the charts' sidecar container both
// listeners are set in the environment (LEADER_SIDECAR_OPS_ADDRESS=:port,
// the ops listener on every interface; LEADER_SIDECAR_HTTP_ADDRESS on
// loopback), as the README's troubleshooting command runs it.
// `sidecar probe /leader` asks the app listener, the only one serving
// /leader, and prints the body alone, so it pipes into jq; the probe
// paths go to the ops listener; a failure prints its status on stderr.
func TestProbeInTheChartsEnvironment(t *testing.T) {
	t.Parallel()
	s := sidecartest.Start(t, sidecartest.DBPath(t), "--ops-address", "127.0.0.1:0")
	if leader, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 10*time.Second); leader != s || token != 1 {
		t.Fatalf("leader %v token %d", leader, token)
	}
	_, opsPort, err := net.SplitHostPort(s.Listener("ops"))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"LEADER_SIDECAR_OPS_ADDRESS=:" + opsPort, "LEADER_SIDECAR_HTTP_ADDRESS=" + s.Addr()}
	probe := func(path string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(sidecartest.Binary(t), "probe", path)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}

	code, stdout, stderr := probe("/leader")
	var state struct {
		Leader bool   `json:"leader"`
		Token  int64  `json:"token"`
		Holder string `json:"holder"`
	}
	if code != 0 || stderr != "" || json.Unmarshal([]byte(stdout), &state) != nil || !state.Leader || state.Token != 1 || state.Holder == "" {
		t.Fatalf("probe /leader: exit %d, stdout %q (want the JSON state alone), stderr %q", code, stdout, stderr)
	}
	if code, stdout, stderr := probe("/leader/ready"); code != 0 || strings.TrimSpace(stdout) != "leader" || stderr != "" {
		t.Fatalf("probe /leader/ready: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/"} {
		if code, stdout, stderr := probe(path); code != 0 || stdout == "" || stderr != "" {
			t.Fatalf("probe %s: exit %d, stdout %q, stderr %q", path, code, stdout, stderr)
		}
	}
	if code, stdout, stderr := probe("/nothing"); code != 1 || !strings.Contains(stderr, "404 Not Found") || strings.Contains(stdout, "404 Not Found") {
		t.Fatalf("probe /nothing: exit %d, stdout %q, stderr %q; want 1 and the status on stderr", code, stdout, stderr)
	}
}
