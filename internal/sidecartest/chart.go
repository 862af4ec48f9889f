package sidecartest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	sigsyaml "sigs.k8s.io/yaml"
)

// ChartRelease is the release name the chart tests render and install.
const ChartRelease = "demo"

// The image repositories the charts default to and the release publishes:
// the sidecar's, and the example worker's.
const (
	SidecarImageRepository = "ghcr.io/leader-sidecar/leader-sidecar"
	AppImageRepository     = "ghcr.io/leader-sidecar/example-worker"
)

// ChartMeta is what the tests read of a Chart.yaml.
type ChartMeta struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	AppVersion   string `json:"appVersion"`
	KubeVersion  string `json:"kubeVersion"`
	Dependencies []struct {
		Name, Version, Repository string
	} `json:"dependencies"`
}

// ReadChartMeta reads charts/<chart>/Chart.yaml of the repository.
func ReadChartMeta(t testing.TB, chart string) ChartMeta {
	t.Helper()
	return ParseChartMeta(t, chart, MustRead(t, RepoPath(t, "charts", chart, "Chart.yaml")))
}

// ParseChartMeta decodes the Chart.yaml raw; what names it in the failure.
func ParseChartMeta(t testing.TB, what string, raw []byte) ChartMeta {
	t.Helper()
	var m ChartMeta
	if err := utilyaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: Chart.yaml: %v", what, err)
	}
	return m
}

// ChartCase is one combination of the example chart's values.
type ChartCase struct {
	Mode    string // readiness mode
	Native  bool
	Backend string
	Extra   string // more values, YAML under sidecar:
}

// Name is the case as mode/placement/backend.
func (c ChartCase) Name() string {
	placement := "native"
	if !c.Native {
		placement = "plain"
	}
	return c.Mode + "/" + placement + "/" + c.Backend
}

// Values is the case as a values file.
func (c ChartCase) Values() string {
	v := fmt.Sprintf("sidecar:\n  native: %t\n  backend: %s\n  readiness:\n    mode: %s\n", c.Native, c.Backend, c.Mode)
	if c.Extra != "" {
		v += "  " + strings.ReplaceAll(strings.TrimSpace(c.Extra), "\n", "\n  ") + "\n"
	}
	return v
}

// LeaderOnly reports whether only the leader's Pod is ready in the mode.
func (c ChartCase) LeaderOnly() bool { return c.Mode == "probe" || c.Mode == "pod-condition" }

// ChartMatrix is every readiness mode x native or plain x lease or sqlite.
func ChartMatrix() []ChartCase {
	var cases []ChartCase
	for _, mode := range []string{"none", "probe", "pod-condition", "label"} {
		for _, native := range []bool{true, false} {
			for _, backend := range []string{"lease", "sqlite"} {
				cases = append(cases, ChartCase{Mode: mode, Native: native, Backend: backend})
			}
		}
	}
	return cases
}

// Rendered is the output of helm template: every object typed, and as
// unstructured for the API server.
type Rendered struct {
	Objects []runtime.Object
	Raw     []*unstructured.Unstructured
	// Hooks and HookRaw are the objects Helm runs as hooks (those with a
	// helm.sh/hook annotation), apart: they are not the release's.
	Hooks   []runtime.Object
	HookRaw []*unstructured.Unstructured
}

// RenderChart runs helm template on the example chart in dir with values
// (YAML) in namespace ns and decodes every manifest.
func RenderChart(t testing.TB, dir, ns, values string) *Rendered {
	t.Helper()
	out, err := TemplateChart(t, dir, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	return DecodeManifests(t, out)
}

// TemplateChart runs helm template on the example chart in dir with values
// (YAML) in namespace ns and returns its output or its error.
func TemplateChart(t testing.TB, dir, ns, values string) (string, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return RunHelm(t, "template", ChartRelease, filepath.Join(dir, "leader-sidecar-example"), "--namespace", ns, "--values", file,
		"--api-versions", PrometheusRuleAPI)
}

// PrometheusRuleAPI is the API of the Prometheus Operator's
// PrometheusRule as helm template's --api-versions names it: TemplateChart
// renders for a cluster that serves it, as a chart with
// prometheusRule.enabled needs.
const PrometheusRuleAPI = "monitoring.coreos.com/v1/PrometheusRule"

// DecodeManifests decodes a stream of YAML manifests strictly: a key that
// appears twice in a mapping (a lenient decoder keeps the last one, and
// what the first one held is gone), a field the typed API does not know,
// or a stream with no object fails t.
func DecodeManifests(t testing.TB, stream string) *Rendered {
	t.Helper()
	r, err := decodeManifests(stream)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func decodeManifests(stream string) (*Rendered, error) {
	docs, err := yamlDocuments(stream)
	if err != nil {
		return nil, err
	}
	r := &Rendered{}
	for _, doc := range docs {
		jsonDoc, err := sigsyaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("manifest is not YAML: %v\n%s", err, doc)
		}
		if string(jsonDoc) == "null" || len(bytes.TrimSpace(jsonDoc)) == 0 {
			continue
		}
		obj, _, err := strictDecoder.Decode(jsonDoc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding a manifest: %v\n%s", err, doc)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(jsonDoc); err != nil {
			return nil, err
		}
		if _, hook := u.GetAnnotations()["helm.sh/hook"]; hook {
			r.Hooks = append(r.Hooks, obj)
			r.HookRaw = append(r.HookRaw, u)
			continue
		}
		r.Objects = append(r.Objects, obj)
		r.Raw = append(r.Raw, u)
	}
	if len(r.Objects) == 0 {
		return nil, errors.New("helm template rendered nothing")
	}
	return r, nil
}

// yamlDocuments splits a stream of YAML documents.
func yamlDocuments(stream string) ([][]byte, error) {
	var docs [][]byte
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, doc)
	}
}

var strictDecoder = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	kjson.SerializerOptions{Strict: true})

// Find is every rendered object of type T.
func Find[T runtime.Object](t testing.TB, r *Rendered) []T {
	t.Helper()
	var out []T
	for _, o := range r.Objects {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// One is the one rendered object of type T; another count fails t.
func One[T runtime.Object](t testing.TB, r *Rendered) T {
	t.Helper()
	all := Find[T](t, r)
	if len(all) != 1 {
		var zero T
		t.Fatalf("rendered %d objects of type %T, want 1", len(all), zero)
	}
	return all[0]
}

// EnvOf is a container's environment by name.
func EnvOf(c *corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

// ContainerNamed is the container called name, or nil.
func ContainerNamed(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// SidecarCheck runs bin check with args in exactly env, as a container
// given them would run the sidecar, and returns its exit status and
// stderr; a binary that cannot run fails t.
func SidecarCheck(t testing.TB, bin string, args, env []string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"check"}, args...)...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), strings.TrimSpace(stderr.String())
	}
	t.Fatalf("sidecar check: %v", err)
	return 0, ""
}
