//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// prometheusOperator is the release of the Prometheus Operator whose
// PrometheusRule CRD the cluster is given: from the Go module proxy, which
// serves the operator's repository with its CRDs.
const prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.88.0"

// TestPrometheusRuleAndDashboardApply installs the example chart with the
// PrometheusRule and the Grafana dashboard on, on a cluster that has the
// Prometheus Operator's PrometheusRule CRD: the API server validates the
// rule against the CRD's schema and keeps every alert of the chart, and
// the dashboard's ConfigMap carries the label Grafana's sidecar looks for
// and a dashboard that parses.
func TestPrometheusRuleAndDashboardApply(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	download := exec.CommandContext(ctx, "go", "mod", "download", "-json", prometheusOperator)
	download.Dir = t.TempDir() // outside the repository's module: go.sum stays as it is
	out, err := download.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s", prometheusOperator, err, out)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: no directory in %s (%v)", prometheusOperator, out, err)
	}
	crd := filepath.Join(mod.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_prometheusrules.yaml")
	cl.run(t, ctx, cl.kubectl, "apply", "--server-side", "-f", crd)
	cl.run(t, ctx, cl.kubectl, "wait", "--for", "condition=Established", "--timeout", "60s", "crd/prometheusrules.monitoring.coreos.com")

	ns := cl.namespace(t)
	install(t, ctx, ns, "--set", "replicaCount=1", "--set", "prometheusRule.enabled=true",
		"--set", "grafanaDashboard.enabled=true", "--wait", "--timeout", "2m")

	var rules struct {
		Items []struct {
			Spec struct {
				Groups []struct {
					Rules []struct {
						Alert string `json:"alert"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"spec"`
		} `json:"items"`
	}
	raw := cl.run(t, ctx, cl.kubectl, "get", "prometheusrules", "--namespace", ns, "-o", "json")
	if err := json.Unmarshal([]byte(raw), &rules); err != nil {
		t.Fatalf("kubectl get prometheusrules: %v\n%s", err, raw)
	}
	if len(rules.Items) != 1 {
		t.Fatalf("%d PrometheusRules in the release's namespace, want 1", len(rules.Items))
	}
	var alerts []string
	for _, g := range rules.Items[0].Spec.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
		}
	}
	// The alerts the chart ships: every `- alert:` of its rule file.
	shipped := strings.Count(string(sidecartest.MustRead(t, filepath.Join(cl.root, "charts", "leader-sidecar-lib", "files", "alerts.yaml"))), "- alert: ")
	if shipped == 0 || len(alerts) != shipped {
		t.Fatalf("the PrometheusRule on the cluster has alerts %q, want the chart's %d", alerts, shipped)
	}

	cms, err := cl.client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "grafana_dashboard=1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 1 {
		t.Fatalf("%d ConfigMaps labelled grafana_dashboard=1, want 1", len(cms.Items))
	}
	for name, data := range cms.Items[0].Data {
		var dashboard struct {
			Title  string            `json:"title"`
			Panels []json.RawMessage `json:"panels"`
		}
		if err := json.Unmarshal([]byte(data), &dashboard); err != nil || dashboard.Title == "" || len(dashboard.Panels) == 0 {
			t.Fatalf("ConfigMap %s key %s is not a dashboard with a title and panels (%v)", cms.Items[0].Name, name, err)
		}
		t.Logf("PrometheusRule with %d alerts; dashboard %q with %d panels in ConfigMap %s", len(alerts), dashboard.Title, len(dashboard.Panels), cms.Items[0].Name)
	}
}
