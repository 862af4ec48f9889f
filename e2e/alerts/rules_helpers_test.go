package alerts

import (
	"os"
	"os/exec"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// ruleFile is the rule file, from the repository's root.
var ruleFile = []string{"charts", "leader-sidecar-lib", "files", "alerts.yaml"}

// unitTests is promtool's unit-test file for ruleFile.
const unitTests = "testdata/alerts_test.yaml"

// rule is one alerting rule of a Prometheus rule file.
type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

// alerts returns the rules of the rule file, in order.
func alerts(t *testing.T) []rule {
	t.Helper()
	var g ruleGroups
	if err := sigsyaml.UnmarshalStrict(readRuleFile(t), &g); err != nil {
		t.Fatal(err)
	}
	var out []rule
	for _, group := range g.Groups {
		out = append(out, group.Rules...)
	}
	if len(out) == 0 {
		t.Fatal("no rule in the rule file")
	}
	return out
}

func readRuleFile(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(sidecartest.RepoPath(t, ruleFile...))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// promtool returns the promtool binary, or fails t: the alert tests are
// part of the suite, so a missing promtool is a failure, not a skip.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("no promtool (%v): install it (Debian: apt-get install prometheus), "+
			"or run hack/test-deps.sh, which does", err)
	}
	return path
}

// runPromtool runs promtool with args and fails t, with its output, unless
// it succeeds.
func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := tryPromtool(t, args...)
	if err != nil {
		t.Fatalf("promtool %v: %v\n%s", args, err, out)
	}
	return out
}

// tryPromtool runs promtool with args and returns its output and error.
func tryPromtool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	return string(out), err
}
