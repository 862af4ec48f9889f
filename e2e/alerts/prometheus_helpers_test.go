package alerts

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// health is an app's health endpoint whose answer the test sets.
type health struct {
	sick atomic.Bool
	srv  *httptest.Server
}

func newHealth(t *testing.T) *health {
	h := &health{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if h.sick.Load() {
			http.Error(w, "unwell", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *health) URL() string { return h.srv.URL + "/healthz" }

// prometheus is a Prometheus server of the test's own, on loopback.
type prometheus struct {
	base string
}

// startPrometheus starts Debian's prometheus on a free loopback port with
// a fresh storage directory, scraping targets every second with the label
// namespace=e2e and evaluating the rule file rules every second, and waits
// until it is ready. A missing prometheus fails t.
func startPrometheus(t *testing.T, rules string, targets []string) *prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("no prometheus server (%v): install it (Debian: apt-get install prometheus), "+
			"or run hack/test-deps.sh, which does", err)
	}
	dir := t.TempDir()
	config := map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
		"rule_files": []string{rules},
		"scrape_configs": []any{map[string]any{
			"job_name":       "leader-sidecar",
			"static_configs": []any{map[string]any{"targets": targets, "labels": map[string]string{"namespace": "e2e"}}},
		}},
	}
	raw, err := sigsyaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	cmd := exec.Command(bin, "--config.file="+configFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	var logs sidecartest.LockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus logs:\n%s", logs.String())
		}
	})
	p := &prometheus{base: "http://" + addr}
	sidecartest.WaitTrue(t, "prometheus is ready", 20*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("prometheus exited:\n%s", logs.String())
		default:
		}
		resp, err := sidecartest.Client.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// freeLoopbackAddr is a loopback address whose port was free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// apiGet asks the HTTP API path with query and decodes data into out. It
// fails t unless the answer is a success.
func (p *prometheus) apiGet(t *testing.T, path string, query url.Values, out any) {
	t.Helper()
	resp, err := sidecartest.Client.Get(p.base + path + "?" + query.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("%s %v: %v", path, query, err)
	}
	if answer.Status != "success" {
		t.Fatalf("%s %v: %s: %s", path, query, answer.Status, answer.Error)
	}
	if err := json.Unmarshal(answer.Data, out); err != nil {
		t.Fatalf("%s %v: %v", path, query, err)
	}
}

// sample is one series of an instant query's answer.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s sample) value() string { v, _ := s.Value[1].(string); return v }

// query runs an instant PromQL query, failing t if Prometheus refuses it,
// and returns its vector (a scalar comes back as one sample).
func (p *prometheus) query(t *testing.T, expr string) []sample {
	t.Helper()
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	p.apiGet(t, "/api/v1/query", url.Values{"query": {expr}}, &data)
	switch data.ResultType {
	case "vector":
		var v []sample
		if err := json.Unmarshal(data.Result, &v); err != nil {
			t.Fatal(err)
		}
		return v
	case "scalar":
		var s [2]any
		if err := json.Unmarshal(data.Result, &s); err != nil {
			t.Fatal(err)
		}
		return []sample{{Value: s}}
	default:
		t.Fatalf("query %q answered a %s", expr, data.ResultType)
		return nil
	}
}

// alert is one active alert of /api/v1/alerts.
type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// activeAlerts is every active (pending or firing) alert.
func (p *prometheus) activeAlerts(t *testing.T) []alert {
	t.Helper()
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	p.apiGet(t, "/api/v1/alerts", nil, &data)
	return data.Alerts
}

// alerts is every active (pending or firing) alert, as "name=state", by
// alert name and election (namespace/lease).
func (p *prometheus) alerts(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range p.activeAlerts(t) {
		name := a.Labels["alertname"]
		if a.Labels["lease"] != "" {
			name += "{" + a.Labels["namespace"] + "/" + a.Labels["lease"] + "}"
		}
		if out[name] != "firing" {
			out[name] = a.State
		}
	}
	return out
}

func describe(alerts map[string]string) string {
	var parts []string
	for name, state := range alerts {
		parts = append(parts, fmt.Sprintf("%s=%s", name, state))
	}
	return strings.Join(parts, ", ")
}

// awaitEvaluationAfter waits until every rule group has begun an
// evaluation after since, so that the alerts' states reflect the samples
// Prometheus had ingested by then rather than an older evaluation's.
func (p *prometheus) awaitEvaluationAfter(t *testing.T, since time.Time, within time.Duration) {
	t.Helper()
	sidecartest.WaitTrue(t, "a rule evaluation after "+since.Format(time.RFC3339Nano), within, func() bool {
		var data struct {
			Groups []struct {
				Name           string    `json:"name"`
				LastEvaluation time.Time `json:"lastEvaluation"`
			} `json:"groups"`
		}
		p.apiGet(t, "/api/v1/rules", nil, &data)
		if len(data.Groups) == 0 {
			t.Fatal("prometheus has no rule groups")
		}
		for _, g := range data.Groups {
			if !g.LastEvaluation.After(since) {
				return false
			}
		}
		return true
	})
}
