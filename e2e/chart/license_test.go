package chart

import (
	"os"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The project is Apache-2.0: the full license text at the top of the
// repository, the README's end naming it, and each chart declaring it the
// way chart indexes read it (the artifacthub.io/license annotation).
func TestChartLicense(t *testing.T) {
	text, err := os.ReadFile(sidecartest.RepoPath(t, "LICENSE"))
	if err != nil {
		t.Fatalf("no LICENSE: %v", err)
	}
	for _, want := range []string{
		"Apache License\n                           Version 2.0, January 2004",
		"TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
		"9. Accepting Warranty or Additional Liability.",
		"END OF TERMS AND CONDITIONS",
		"APPENDIX: How to apply the Apache License to your work.",
	} {
		if !strings.Contains(string(text), want) {
			t.Fatalf("LICENSE is not the full Apache-2.0 text: %q is missing", want)
		}
	}

	readme, err := os.ReadFile(sidecartest.RepoPath(t, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(readme)), "\n")
	tail := strings.Join(lines[max(0, len(lines)-10):], "\n")
	if !strings.Contains(tail, "Apache License 2.0") || !strings.Contains(tail, "LICENSE") {
		t.Fatalf("the README's end does not name the license:\n%s", tail)
	}

	for _, chart := range []string{"leader-sidecar-lib", "leader-sidecar-example"} {
		f, err := os.Open(sidecartest.RepoPath(t, "charts", chart, "Chart.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Annotations map[string]string `json:"annotations"`
		}
		err = utilyaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&meta)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := meta.Annotations["artifacthub.io/license"]; got != "Apache-2.0" {
			t.Errorf("%s: annotation artifacthub.io/license is %q, want Apache-2.0", chart, got)
		}
	}
}
