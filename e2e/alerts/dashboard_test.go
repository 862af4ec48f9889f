package alerts

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// dashboardFile is the Grafana dashboard, from the repository's root.
var dashboardFile = []string{"charts", "leader-sidecar-lib", "files", "dashboard.json"}

func readDashboard(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(sidecartest.RepoPath(t, dashboardFile...))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// dashboardQuery is one PromQL expression of the dashboard, with Grafana's
// variables replaced as Grafana would for one live test's election, where
// it was found, and the title of the row its panel is in ("" for a
// variable).
type dashboardQuery struct {
	where, expr, row string
}

// shardsRow is the title of the dashboard's row of shard groups' panels,
// whose queries return data only for a shard group.
const shardsRow = "Shards"

// grafanaVariables are what Grafana puts in place of the dashboard's
// variables for a live test's election lease in namespace e2e
// ($__rate_interval: four scrape intervals at least; a minute holds many
// 1s scrapes).
func grafanaVariables(lease string) *strings.Replacer {
	return strings.NewReplacer("$namespace", "e2e", "$lease", lease, "$__rate_interval", "1m")
}

// labelValues is a query variable's Grafana function around a PromQL
// selector.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// dashboardQueries is every PromQL expression of the dashboard, for the
// election lease: each panel target's expr, with the row it is in (the
// row panel above it: Grafana puts a panel in the last row whose y is not
// below its own), and the selector inside each query variable's
// label_values. It fails t on a panel target without one.
func dashboardQueries(t *testing.T, lease string) []dashboardQuery {
	t.Helper()
	vars := grafanaVariables(lease)
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			GridPos struct {
				Y int `json:"y"`
			} `json:"gridPos"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(readDashboard(t), &d); err != nil {
		t.Fatal(err)
	}
	rowOf := func(y int) string {
		row, rowY := "", -1
		for _, p := range d.Panels {
			if p.Type == "row" && p.GridPos.Y <= y && p.GridPos.Y > rowY {
				row, rowY = p.Title, p.GridPos.Y
			}
		}
		return row
	}
	var out []dashboardQuery
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		row := rowOf(p.GridPos.Y)
		if row == "" {
			t.Errorf("panel %q is in no row", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %s has no expr", p.Title, tg.RefID)
				continue
			}
			out = append(out, dashboardQuery{fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), vars.Replace(tg.Expr), row})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		m := labelValues.FindStringSubmatch(fmt.Sprint(q["query"]))
		if m == nil {
			t.Errorf("variable %s: query %v is not label_values(selector, label)", v.Name, v.Query)
			continue
		}
		out = append(out, dashboardQuery{"variable " + v.Name, vars.Replace(m[1]), ""})
	}
	if len(out) < 10 {
		t.Fatalf("%d queries in the dashboard, want at least 10", len(out))
	}
	return out
}

// Every query filters on the dashboard's election: namespace and lease.
func TestDashboardQueriesSelectTheElection(t *testing.T) {
	raw := readDashboard(t)
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "expr" {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(d)
	for _, e := range exprs {
		for _, sel := range regexp.MustCompile(`leader_sidecar_\w+(\{[^}]*\})?`).FindAllStringSubmatch(e, -1) {
			if !strings.Contains(sel[1], `namespace=~"$namespace"`) || !strings.Contains(sel[1], `lease=~"$lease"`) {
				t.Errorf("%q: %s does not select the dashboard's namespace and lease", e, sel[0])
			}
		}
	}
}

// Off by default; enabled, the example chart renders a ConfigMap holding
// the dashboard file unchanged, labelled grafana_dashboard: "1" for
// kube-prometheus-stack's Grafana sidecar, with the labels and annotations
// the values set.
func TestChartDashboardConfigMap(t *testing.T) {
	dir := sidecartest.Charts(t)
	dashboards := func(values string) []*corev1.ConfigMap {
		t.Helper()
		r, _ := sidecartest.ExampleExtras(t, dir, values)
		var out []*corev1.ConfigMap
		for _, cm := range sidecartest.Find[*corev1.ConfigMap](t, r) {
			if _, ok := cm.Data["leader-sidecar.json"]; ok {
				out = append(out, cm)
			}
		}
		return out
	}
	if got := dashboards(""); len(got) != 0 {
		t.Fatalf("%d dashboard ConfigMaps by default, want none", len(got))
	}
	for values, want := range map[string]map[string]string{
		"grafanaDashboard: {enabled: true, annotations: {grafana_folder: Elections}}":                                                        {"grafana_dashboard": "1"},
		"grafanaDashboard: {enabled: true, labels: {grafana_dashboard: null, dashboards: leader}, annotations: {grafana_folder: Elections}}": {"dashboards": "leader"},
	} {
		got := dashboards(values)
		if len(got) != 1 {
			t.Fatalf("%s: %d dashboard ConfigMaps, want 1", values, len(got))
		}
		cm := got[0]
		for k, v := range want {
			if cm.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", values, k, cm.Labels[k], v)
			}
		}
		if _, ok := want["grafana_dashboard"]; !ok && cm.Labels["grafana_dashboard"] != "" {
			t.Errorf("%s: grafana_dashboard label kept: %v", values, cm.Labels)
		}
		if cm.Annotations["grafana_folder"] != "Elections" {
			t.Errorf("%s: annotations %v", values, cm.Annotations)
		}
		if strings.TrimSuffix(string(readDashboard(t)), "\n") != cm.Data["leader-sidecar.json"] {
			t.Errorf("%s: the ConfigMap's dashboard is not files/dashboard.json", values)
		}
	}
	// helm lint --strict finds nothing with the dashboard on (the rules
	// need the Prometheus Operator's API, which helm lint cannot be told
	// of: TestChartPrometheusRuleNeedsTheOperatorsAPI).
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte("grafanaDashboard: {enabled: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := sidecartest.RunHelm(t, "lint", "--strict", filepath.Join(dir, "leader-sidecar-example"), "--values", file)
	if err != nil || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
}
