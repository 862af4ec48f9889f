package sidecartest

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"
)

// MonitoringAPI is the Prometheus Operator's API version.
const MonitoringAPI = "monitoring.coreos.com/v1"

// RenderWithMonitors is RenderChart for streams that may hold Prometheus
// Operator objects, which the typed decoder does not know: those come back
// unstructured, the rest as RenderChart returns them.
func RenderWithMonitors(t testing.TB, stream string) (*Rendered, []*unstructured.Unstructured) {
	t.Helper()
	var typed []string
	var monitors []*unstructured.Unstructured
	docs, err := yamlDocuments(stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		if j, err := sigsyaml.YAMLToJSONStrict(doc); err == nil && len(j) > 4 && u.UnmarshalJSON(j) == nil && u.GetAPIVersion() == MonitoringAPI {
			monitors = append(monitors, u)
			continue
		}
		typed = append(typed, string(doc))
	}
	return DecodeManifests(t, strings.Join(typed, "\n---\n")), monitors
}

// ExampleExtras renders the example chart in dir with values, monitors
// apart (see RenderWithMonitors).
func ExampleExtras(t testing.TB, dir, values string) (*Rendered, []*unstructured.Unstructured) {
	t.Helper()
	out, err := TemplateChart(t, dir, "apps", values)
	if err != nil {
		t.Fatal(err)
	}
	return RenderWithMonitors(t, out)
}
