package alerts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// renderedRules renders the example chart with values and returns its
// PrometheusRules.
func renderedRules(t *testing.T, dir, values string) []*unstructured.Unstructured {
	t.Helper()
	_, monitors := sidecartest.ExampleExtras(t, dir, values)
	var rules []*unstructured.Unstructured
	for _, m := range monitors {
		if m.GetKind() == "PrometheusRule" {
			rules = append(rules, m)
		}
	}
	return rules
}

// specGroups is the rendered rule's spec.groups, as JSON values.
func specGroups(t *testing.T, r *unstructured.Unstructured) any {
	t.Helper()
	groups, found, err := unstructured.NestedFieldNoCopy(r.Object, "spec", "groups")
	if err != nil || !found {
		t.Fatalf("PrometheusRule without spec.groups: %v", err)
	}
	return groups
}

// fileGroups is the rule file's groups, as JSON values.
func fileGroups(t *testing.T) []any {
	t.Helper()
	var file struct {
		Groups []any `json:"groups"`
	}
	if err := sigsyaml.UnmarshalStrict(readRuleFile(t), &file); err != nil {
		t.Fatal(err)
	}
	return file.Groups
}

func sameJSON(t *testing.T, got, want any) bool {
	t.Helper()
	var g, w any
	for _, c := range []struct {
		in  any
		out *any
	}{{got, &g}, {want, &w}} {
		raw, err := json.Marshal(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, c.out); err != nil {
			t.Fatal(err)
		}
	}
	return reflect.DeepEqual(g, w)
}

// Off by default; enabled, the example chart's PrometheusRule holds the
// rule file's groups unchanged, with the labels the values add.
func TestChartPrometheusRuleHoldsTheRuleFile(t *testing.T) {
	dir := sidecartest.Charts(t)
	if rules := renderedRules(t, dir, ""); len(rules) != 0 {
		t.Fatalf("%d PrometheusRules rendered by default, want none", len(rules))
	}
	rules := renderedRules(t, dir, "prometheusRule: {enabled: true, labels: {release: prometheus}}")
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(rules))
	}
	r := rules[0]
	if r.GetAPIVersion() != sidecartest.MonitoringAPI || r.GetLabels()["release"] != "prometheus" {
		t.Errorf("PrometheusRule %s with labels %v, want %s with release=prometheus",
			r.GetAPIVersion(), r.GetLabels(), sidecartest.MonitoringAPI)
	}
	if got, want := specGroups(t, r), fileGroups(t); !sameJSON(t, got, want) {
		got, _ := sigsyaml.Marshal(got)
		want, _ := sigsyaml.Marshal(want)
		t.Fatalf("the PrometheusRule's groups are not the rule file's:\n%s\nwant:\n%s", got, want)
	}
}

// prometheusRule.alerts tunes for, severity and threshold, and leaves an
// alert out, changing nothing else; the result still passes promtool.
func TestChartPrometheusRuleTuning(t *testing.T) {
	dir := sidecartest.Charts(t)
	rules := renderedRules(t, dir, `prometheusRule:
  enabled: true
  alerts:
    LeaderSidecarFlapping: {threshold: 10, for: 10m, severity: critical}
    LeaderSidecarLeaseStale: {threshold: 600}
    LeaderSidecarShardFlapping: {threshold: 8, for: 5m}
    LeaderSidecarShardLeaseStale: {threshold: 300, for: 2m}
    LeaderSidecarTokenAnomaly: {enabled: false}
`)
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(rules))
	}
	want := fileGroups(t)
	for _, g := range want {
		g := g.(map[string]any)
		var kept []any
		for _, r := range g["rules"].([]any) {
			r := r.(map[string]any)
			switch r["alert"] {
			case "LeaderSidecarFlapping":
				r["expr"] = replaceOnce(t, r["expr"].(string), "> 4", "> 10")
				r["for"] = "10m"
				r["labels"].(map[string]any)["severity"] = "critical"
			case "LeaderSidecarLeaseStale":
				r["expr"] = replaceOnce(t, r["expr"].(string), "> 120", "> 600")
			case "LeaderSidecarShardFlapping":
				r["expr"] = replaceOnce(t, r["expr"].(string), "> 4", "> 8")
				r["for"] = "5m"
			case "LeaderSidecarShardLeaseStale":
				r["expr"] = replaceOnce(t, r["expr"].(string), "> 120", "> 300")
				r["for"] = "2m"
			case "LeaderSidecarTokenAnomaly":
				continue
			}
			kept = append(kept, r)
		}
		g["rules"] = kept
	}
	got := specGroups(t, rules[0])
	if !sameJSON(t, got, want) {
		got, _ := sigsyaml.Marshal(got)
		want, _ := sigsyaml.Marshal(want)
		t.Fatalf("tuned groups:\n%s\nwant:\n%s", got, want)
	}
	raw, err := sigsyaml.Marshal(map[string]any{"groups": got})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tuned.yaml")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, "check", "rules", file)
}

func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if strings.Count(s, old) != 1 {
		t.Fatalf("%q holds %q %d times, want once", s, old, strings.Count(s, old))
	}
	return strings.Replace(s, old, new, 1)
}

// helm refuses tuning that would mean nothing: an alert that does not
// exist, a threshold on an alert without one, a for: that is no duration.
func TestChartPrometheusRuleRefusesUnknownTuning(t *testing.T) {
	dir := sidecartest.Charts(t)
	for values, want := range map[string]string{
		"alerts: {LeaderSidecarNoSuchAlert: {for: 1m}}":    "no such alert",
		"alerts: {LeaderSidecarNoLeader: {threshold: 1}}":  "has no threshold to tune",
		"alerts: {LeaderSidecarNoLeader: {for: \"soon\"}}": "for",
	} {
		_, err := sidecartest.TemplateChart(t, dir, "apps", "prometheusRule: {enabled: true, "+values+"}")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("prometheusRule %s: %v, want an error with %q", values, err, want)
		}
	}
}

// On a cluster without the Prometheus Operator's API, prometheusRule
// enabled is refused at render time, with a message that names the API
// and what to do; with the API the rule renders.
func TestChartPrometheusRuleNeedsTheOperatorsAPI(t *testing.T) {
	dir := sidecartest.Charts(t)
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte("prometheusRule: {enabled: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(dir, "leader-sidecar-example")
	_, err := sidecartest.RunHelm(t, "template", sidecartest.ChartRelease, chart, "--namespace", "apps", "--values", file)
	if err == nil || !strings.Contains(err.Error(), "monitoring.coreos.com/v1, kind PrometheusRule") || !strings.Contains(err.Error(), "--api-versions") {
		t.Errorf("prometheusRule.enabled on a cluster without the operator's API: %v; want it refused naming the API", err)
	}
	if _, err := sidecartest.RunHelm(t, "template", sidecartest.ChartRelease, chart, "--namespace", "apps", "--values", file,
		"--api-versions", sidecartest.PrometheusRuleAPI); err != nil {
		t.Errorf("prometheusRule.enabled with the operator's API: %v", err)
	}
}
