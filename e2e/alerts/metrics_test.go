package alerts

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// scrapeMetrics is the sidecar's /metrics, in the text format.
func scrapeMetrics(t *testing.T, s *sidecartest.Sidecar) string {
	t.Helper()
	resp, err := sidecartest.Client.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(body)
}

// A real sidecar's /metrics, from a leader that has renewed and has
// checked its app, passes promtool check metrics (Prometheus's naming and
// help-text lint) with no finding, and holds every metric the alerts and
// the dashboard read.
func TestMetricsPassPromtoolCheck(t *testing.T) {
	bin := promtool(t)
	db := sidecartest.DBPath(t)
	app := newHealth(t)
	s := sidecartest.Start(t, db, "--lease-name", "lint", "--app-health-url", app.URL(), "--app-health-period", "100ms")
	sidecartest.WaitTrue(t, "the sidecar leads and has renewed", 10*time.Second, func() bool {
		return strings.Contains(scrapeMetrics(t, s), `leader_sidecar_store_request_duration_seconds_count{lease="lint",operation="update",result="ok"}`)
	})
	out := scrapeMetrics(t, s)
	for _, name := range []string{
		"leader_sidecar_is_leader", "leader_election_master_status", "leader_sidecar_token",
		"leader_sidecar_leadership_transitions_total", "leader_sidecar_term_gap_seconds_bucket",
		"leader_sidecar_term_start_timestamp_seconds", "leader_sidecar_last_renewal_timestamp_seconds",
		"leader_sidecar_renew_failures_total", "leader_sidecar_token_anomalies_total",
		"leader_sidecar_store_request_duration_seconds_bucket", "leader_sidecar_app_healthy",
		"leader_sidecar_build_info",
	} {
		if !strings.Contains(out, "\n"+name+"{") {
			t.Errorf("/metrics has no %s", name)
		}
	}
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = strings.NewReader(out)
	if lint, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(lint))) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, lint)
	}
}
