package alerts

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
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
		"leader_sidecar_renew_failures_total", "leader_sidecar_token_anomalies_total", "leader_sidecar_record_lease_bounded_total",
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

// series are the samples of the metric name in a /metrics text, by their
// labels as written between the braces.
func series(text, name string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err == nil {
			out[labels] = v
		}
	}
	return out
}

// Two real sidecars in shard mode (8 shards, one SQLite file): once the
// shards are spread, every shard has its
// leader_election_master_status{name="<group>-shard-<i>"} series on both
// replicas and the two sum to 1 for each (the sum the alerts take by
// name), each replica's shards_held is the count of its 1s, both see two
// members and have counted at least their terms as acquired moves; and
// both /metrics pass promtool check metrics with no finding.
func TestShardMetricsPassPromtoolCheck(t *testing.T) {
	bin := promtool(t)
	db := sidecartest.DBPath(t)
	args := append([]string{"--lease-name", "lint"}, sidecartest.ShardArgs()...)
	p := sidecartest.NewShardSampler(sidecartest.TestShards)
	live := []*sidecartest.Sidecar{sidecartest.Launch(t, db, args...), sidecartest.Launch(t, db, args...)}
	for _, s := range live {
		s.WaitServing()
		p.Sample(s)
	}
	p.AwaitSpread(t, live, 20*time.Second, sidecartest.AnyToken)

	var outs []string
	var problem string
	agree := func() bool {
		outs, problem = nil, ""
		sum := map[string]float64{}
		for _, s := range live {
			out := scrapeMetrics(t, s)
			outs = append(outs, out)
			status := series(out, "leader_election_master_status")
			if len(status) != sidecartest.TestShards {
				problem = fmt.Sprintf("%d master_status series, want %d", len(status), sidecartest.TestShards)
				return false
			}
			ones := 0.0
			for labels, v := range status {
				sum[labels] += v
				ones += v
			}
			own := `lease="lint"`
			if held := series(out, "leader_sidecar_shards_held")[own]; held != ones {
				problem = fmt.Sprintf("shards_held %v, master_status 1 on %v shards", held, ones)
				return false
			}
			if m := series(out, "leader_sidecar_shard_members")[own]; m != 2 {
				problem = fmt.Sprintf("shard_members %v, want 2", m)
				return false
			}
			if a := series(out, "leader_sidecar_shard_moves_total")[`event="acquired",`+own]; a < ones {
				problem = fmt.Sprintf("shard_moves_total{event=acquired} %v below the %v shards held", a, ones)
				return false
			}
		}
		for i := range sidecartest.TestShards {
			if s := sum[fmt.Sprintf(`name="lint-shard-%d"`, i)]; s != 1 {
				problem = fmt.Sprintf("shard %d: master_status sums to %v over the replicas", i, s)
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(10 * time.Second); !agree(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the replicas' shard metrics disagree after 10s: %s", problem)
		}
	}
	p.Check(t)
	for _, out := range outs {
		for _, name := range []string{
			"leader_election_master_status", "leader_sidecar_shards_held", "leader_sidecar_shards_draining",
			"leader_sidecar_shard_members", "leader_sidecar_shard_moves_total",
			"leader_sidecar_leadership_transitions_total", "leader_sidecar_store_request_duration_seconds_bucket",
			"leader_sidecar_build_info",
		} {
			if !strings.Contains(out, "\n"+name+"{") {
				t.Errorf("/metrics has no %s", name)
			}
		}
		if strings.Contains(out, "\nleader_sidecar_is_leader{") {
			t.Errorf("/metrics in shard mode has the single election's is_leader")
		}
		cmd := exec.Command(bin, "check", "metrics")
		cmd.Stdin = strings.NewReader(out)
		if lint, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(lint))) > 0 {
			t.Fatalf("promtool check metrics: %v\n%s", err, lint)
		}
	}
}
