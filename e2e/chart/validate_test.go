package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// What the charts refuse at render time, naming the value: the example
// chart's values.schema.json, the library's own checks (for a chart with no
// schema for sidecar:), and the two charts' schemas kept equal. That they
// refuse exactly what the sidecar refuses is agreement_test.go.

// TestChartSchemaRejectsBadValues: helm refuses values that violate the
// example chart's values.schema.json, naming the field.
func TestChartSchemaRejectsBadValues(t *testing.T) {
	dir := sidecartest.Charts(t)
	cases := []struct {
		name, values, field string
	}{
		{"unknown readiness mode", "sidecar:\n  readiness:\n    mode: leader\n", "/sidecar/readiness/mode"},
		{"unknown backend", "sidecar:\n  backend: etcd\n", "/sidecar/backend"},
		{"native not a boolean", "sidecar:\n  native: \"yes\"\n", "/sidecar/native"},
		{"duration without unit", "sidecar:\n  leaseDuration: 15\n", "/sidecar/leaseDuration"},
		{"misspelt setting", "sidecar:\n  leaseDurration: 15s\n", "leaseDurration"},
		{"claim without name", "sidecar:\n  backend: sqlite\n  sqlite:\n    volume:\n      type: persistentVolumeClaim\n", "/sidecar/sqlite/volume"},
		{"port out of range", "sidecar:\n  opsPort: 70000\n", "/sidecar/opsPort"},
		{"required image removed", "sidecar:\n  image:\n    repository: null\n", "repository"},
		{"replicas negative", "replicaCount: -1\n", "/replicaCount"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := sidecartest.TemplateChart(t, dir, "apps", c.values)
			if err == nil {
				t.Fatalf("helm accepted values that violate values.schema.json:\n%s", c.values)
			}
			msg := err.Error()
			if !strings.Contains(msg, "values don't meet the specifications of the schema") || !strings.Contains(msg, c.field) {
				t.Fatalf("the error does not name %s as a schema violation:\n%s", c.field, msg)
			}
		})
	}
}

// The library checks at render time what the sidecar would refuse at start
// (or die of, like two listeners on one port), with a message naming the
// value. The helm create chart has no schema for sidecar:, so the
// library's own checks answer there; the example chart, whose schema says
// most of it earlier, still needs the checks a schema cannot make.
func TestChartLibraryRefusesBadValuesNamingThem(t *testing.T) {
	chart := sidecartest.HelmCreateWithLibrary(t)
	cases := []struct {
		name string
		set  []string
		want string
	}{
		{"lease not above renew", []string{"sidecar.leaseDuration=10s"},
			"sidecar.leaseDuration (10s) must be greater than sidecar.renewDeadline (10s)"},
		{"lease not whole seconds", []string{"sidecar.leaseDuration=15500ms"},
			"sidecar.leaseDuration must be a whole number of seconds (a Lease stores seconds), not 15500ms"},
		{"renew not above 1.2 x retry", []string{"sidecar.renewDeadline=2400ms", "sidecar.leaseDuration=5s"},
			"sidecar.renewDeadline (2400ms) must be greater than 1.2 x sidecar.retryPeriod (2s)"},
		{"zero retry", []string{"sidecar.retryPeriod=0s"}, "sidecar.retryPeriod must be greater than 0, not 0s"},
		{"duration without unit", []string{"sidecar.leaseDuration=15"}, "sidecar.leaseDuration must be a duration such as 15s or 1m30s, not 15"},
		{"duration not a duration", []string{"sidecar.renewDeadline=ten"}, "sidecar.renewDeadline must be a duration such as 15s or 1m30s, not ten"},
		{"ops port is the app API's port", []string{"sidecar.opsPort=4040"},
			"sidecar.opsPort (4040) must differ from sidecar.httpPort (4040)"},
		{"port out of range", []string{"sidecar.httpPort=70000"}, "sidecar.httpPort must be a port number from 1 to 65535, not 70000"},
		{"port not a number", []string{"sidecar.opsPort=ops"}, "sidecar.opsPort must be a port number from 1 to 65535, not ops"},
		{"lease created for the sqlite backend", []string{"sidecar.backend=sqlite", "sidecar.lease.create=true"},
			"sidecar.lease.create is for sidecar.backend lease; the sqlite backend has no Lease"},
		{"claim without a name", []string{"sidecar.backend=sqlite", "sidecar.sqlite.volume.type=persistentVolumeClaim"},
			"sidecar.sqlite.volume.claimName is required with sidecar.sqlite.volume.type persistentVolumeClaim"},
		{"condition type without a domain", []string{"sidecar.readiness.mode=pod-condition", "sidecar.readiness.conditionType=Leader"},
			"sidecar.readiness.conditionType must be a domain-qualified name such as leader-sidecar.io/leader, not \"Leader\""},
		{"lease name not a DNS name", []string{"sidecar.leaseName=Billing_Job"},
			"sidecar.leaseName must be a lowercase RFC 1123 subdomain"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := sidecartest.TemplateMyChart(t, chart, c.set...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v: want an error with %q, got %v", c.set, c.want, err)
			}
		})
	}

	// Values at the edges render.
	for _, set := range [][]string{
		{"sidecar.leaseDuration=11s"},
		{"sidecar.leaseDuration=1m", "sidecar.renewDeadline=40s", "sidecar.retryPeriod=5s"},
		{"sidecar.renewDeadline=2500ms", "sidecar.leaseDuration=3s"},
		{"sidecar.opsPort=9090", "sidecar.httpPort=4041"},
		{"sidecar.backend=sqlite", "sidecar.events=false", "serviceAccount.create=true"},
	} {
		if _, err := sidecartest.TemplateMyChart(t, chart, set...); err != nil {
			t.Fatalf("%v: %v", set, err)
		}
	}

	// What a schema cannot say, the example chart gets from the library.
	dir := sidecartest.Charts(t)
	if _, err := sidecartest.TemplateChart(t, dir, "apps", "sidecar:\n  opsPort: 4040\n"); err == nil ||
		!strings.Contains(err.Error(), "sidecar.opsPort (4040) must differ from sidecar.httpPort (4040)") {
		t.Fatalf("the example chart rendered equal ports, or did not name them: %v", err)
	}
	if _, err := sidecartest.TemplateChart(t, dir, "apps", "sidecar:\n  leaseDuration: 10s\n"); err == nil ||
		!strings.Contains(err.Error(), "sidecar.leaseDuration (10s) must be greater than sidecar.renewDeadline (10s)") {
		t.Fatalf("the example chart rendered bad timings, or did not name them: %v", err)
	}
}

// The library's values.schema.json describes sidecar: as the library reads
// it; the example chart's schema says the same of every setting (it only
// requires more), so the two cannot drift apart.
func TestChartLibrarySchema(t *testing.T) {
	read := func(chart string) map[string]any {
		raw, err := os.ReadFile(sidecartest.RepoPath(t, "charts", chart, "values.schema.json"))
		if err != nil {
			t.Fatal(err)
		}
		var s map[string]any
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: %v", chart, err)
		}
		return s
	}
	lib, example := read("leader-sidecar-lib"), read("leader-sidecar-example")
	sidecar := func(s map[string]any) map[string]any {
		return s["properties"].(map[string]any)["sidecar"].(map[string]any)
	}
	ls, es := sidecar(lib), sidecar(example)
	libDefs, exampleDefs := lib["definitions"].(map[string]any), example["definitions"].(map[string]any)
	for what, s := range map[string]map[string]any{"sidecar": ls, "definitions.image": libDefs["image"].(map[string]any)} {
		if _, ok := s["required"]; ok {
			t.Fatalf("the library's schema requires a key of %s: every setting has a default", what)
		}
	}
	// Apart from what the example requires, the same schema.
	if a, b := withoutRequired(ls["properties"]), withoutRequired(es["properties"]); !reflect.DeepEqual(a, b) {
		x, _ := json.MarshalIndent(a, "", " ")
		y, _ := json.MarshalIndent(b, "", " ")
		t.Fatalf("sidecar settings differ:\nlibrary %s\nexample %s", x, y)
	}
	for name, def := range libDefs {
		if !reflect.DeepEqual(withoutRequired(def), withoutRequired(exampleDefs[name])) {
			t.Fatalf("definition %s differs", name)
		}
	}
	// Every default the library applies is valid against its schema.
	dir := sidecartest.Charts(t)
	if out, err := sidecartest.RunHelm(t, "lint", "--strict", filepath.Join(dir, "leader-sidecar-lib")); err != nil || strings.Contains(out, "[WARNING]") {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
}

// withoutRequired is a copy of a decoded schema without its "required" lists.
func withoutRequired(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if k != "required" {
				out[k] = withoutRequired(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withoutRequired(e)
		}
		return out
	}
	return v
}
