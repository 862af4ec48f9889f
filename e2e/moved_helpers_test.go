package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	_ "modernc.org/sqlite"
)

// Helpers of the tests that stay in this package until they move; the
// moved tests use internal/sidecartest.

const chartRelease = "demo"

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm returns the helm binary: $HELM if set, else what hack/helm.sh
// installs. It fails t (never skips): the chart tests are part of the suite.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if p := os.Getenv("HELM"); p != "" {
			helmPath = p
			return
		}
		start := time.Now()
		cmd := exec.Command("../hack/helm.sh")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("hack/helm.sh: %v\n%s", err, stderr.String())
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		helmPath = lines[len(lines)-1]
		fmt.Fprintf(os.Stderr, "helm: %s (hack/helm.sh took %v)\n", helmPath, time.Since(start).Round(time.Millisecond))
	})
	if helmErr != nil {
		t.Fatalf("no helm: %v", helmErr)
	}
	return helmPath
}

// runHelm runs helm with args and returns stdout, or stderr as the error.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(os.TempDir(), "leader-sidecar-helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(os.TempDir(), "leader-sidecar-helm-config"),
		"HELM_DATA_HOME="+filepath.Join(os.TempDir(), "leader-sidecar-helm-data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// charts copies charts/ into a temporary directory and builds the example
// chart's dependency on the library there, so the repository is left as it
// is and the library is always the current one. It returns that directory.
func charts(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "charts")
	if err := os.CopyFS(dir, os.DirFS("../charts")); err != nil {
		t.Fatal(err)
	}
	if _, err := runHelm(t, "dependency", "build", filepath.Join(dir, "leader-sidecar-example")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// chartCase is one combination of values.
type chartCase struct {
	mode    string // readiness mode
	native  bool
	backend string
	extra   string // more values, YAML under sidecar:
}

func (c chartCase) name() string {
	placement := "native"
	if !c.native {
		placement = "plain"
	}
	return c.mode + "/" + placement + "/" + c.backend
}

func (c chartCase) values() string {
	v := fmt.Sprintf("sidecar:\n  native: %t\n  backend: %s\n  readiness:\n    mode: %s\n", c.native, c.backend, c.mode)
	if c.extra != "" {
		v += "  " + strings.ReplaceAll(strings.TrimSpace(c.extra), "\n", "\n  ") + "\n"
	}
	return v
}

func (c chartCase) leaderOnly() bool { return c.mode == "probe" || c.mode == "pod-condition" }

// chartMatrix is every readiness mode x native or plain x lease or sqlite.
func chartMatrix() []chartCase {
	var cases []chartCase
	for _, mode := range []string{"none", "probe", "pod-condition", "label"} {
		for _, native := range []bool{true, false} {
			for _, backend := range []string{"lease", "sqlite"} {
				cases = append(cases, chartCase{mode: mode, native: native, backend: backend})
			}
		}
	}
	return cases
}

// rendered is the output of helm template: every object typed, and as
// unstructured for the API server.
type rendered struct {
	objects []runtime.Object
	raw     []*unstructured.Unstructured
}

// renderChart runs helm template on the example chart in dir with values
// (YAML) in namespace ns and decodes every manifest.
func renderChart(t *testing.T, dir, ns, values string) *rendered {
	t.Helper()
	out, err := templateChart(t, dir, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	return decodeManifests(t, out)
}

func templateChart(t *testing.T, dir, ns, values string) (string, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return runHelm(t, "template", chartRelease, filepath.Join(dir, "leader-sidecar-example"), "--namespace", ns, "--values", file)
}

func decodeManifests(t *testing.T, stream string) *rendered {
	t.Helper()
	r := &rendered{}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		jsonDoc, err := utilyaml.ToJSON(doc)
		if err != nil {
			t.Fatalf("manifest is not YAML: %v\n%s", err, doc)
		}
		if string(jsonDoc) == "null" || len(bytes.TrimSpace(jsonDoc)) == 0 {
			continue
		}
		// Strict: a field the typed API does not know, or a duplicate
		// field, is an error.
		obj, _, err := strictDecoder.Decode(jsonDoc, nil, nil)
		if err != nil {
			t.Fatalf("decoding a manifest: %v\n%s", err, doc)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(jsonDoc); err != nil {
			t.Fatal(err)
		}
		r.objects = append(r.objects, obj)
		r.raw = append(r.raw, u)
	}
	if len(r.objects) == 0 {
		t.Fatal("helm template rendered nothing")
	}
	return r
}

var strictDecoder = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	kjson.SerializerOptions{Strict: true})

func find[T runtime.Object](t *testing.T, r *rendered) []T {
	t.Helper()
	var out []T
	for _, o := range r.objects {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func one[T runtime.Object](t *testing.T, r *rendered) T {
	t.Helper()
	all := find[T](t, r)
	if len(all) != 1 {
		var zero T
		t.Fatalf("rendered %d objects of type %T, want 1", len(all), zero)
	}
	return all[0]
}

func envOf(c *corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func containerNamed(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// sidecarEnvNames is every LEADER_SIDECAR_* variable the binary reads, from
// its --help.
func sidecarEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(sidecarBin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("sidecar --help: %v\n%s", err, out)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`\[env (LEADER_SIDECAR_[A-Z_]+)\]`).FindAllStringSubmatch(string(out), -1) {
		names[m[1]] = true
	}
	if len(names) < 10 {
		t.Fatalf("found only %d environment variables in --help:\n%s", len(names), out)
	}
	return names
}

// ruleKey is a PolicyRule as a comparable string.
func ruleKey(r rbacv1.PolicyRule) string {
	sorted := func(s []string) string {
		s = slices.Clone(s)
		sort.Strings(s)
		return strings.Join(s, ",")
	}
	return fmt.Sprintf("groups=[%s] resources=[%s] names=[%s] verbs=[%s] urls=[%s]",
		sorted(r.APIGroups), sorted(r.Resources), sorted(r.ResourceNames), sorted(r.Verbs), sorted(r.NonResourceURLs))
}

func ruleKeys(rules []rbacv1.PolicyRule) []string {
	var keys []string
	for _, r := range rules {
		keys = append(keys, ruleKey(r))
	}
	sort.Strings(keys)
	return keys
}

// wantRules is the least privilege of a case, exactly.
func wantRules(c chartCase, lease string, leaseCreated, events bool) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	if c.backend == "lease" {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			ResourceNames: []string{lease}, Verbs: []string{"get", "update", "watch"}})
		if !leaseCreated {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}})
		}
		if events {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}})
		}
	}
	switch c.mode {
	case "pod-condition":
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}})
	case "label":
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}})
	}
	return rules
}

// holdWriteLock takes SQLite's write lock on db from this process, as a
// stuck writer would, until the returned function is called.
func holdWriteLock(t *testing.T, db string) func() {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE leader_records SET name = name WHERE 0"); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(); _ = conn.Close() }
}

// sweepEvery is how often the overlap tests ask every sidecar GET /leader.
const sweepEvery = 10 * time.Millisecond
