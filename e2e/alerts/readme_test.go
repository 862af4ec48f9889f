package alerts

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The README's count of the chart's alerts is the rule file's: the number
// it gives comes from the chart, not from memory.
func TestReadmeCountsTheChartsAlerts(t *testing.T) {
	readme, err := os.ReadFile(sidecartest.RepoPath(t, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`PrometheusRule with\s+(\d+)\s+alerts`).FindSubmatch(readme)
	if m == nil {
		t.Fatal(`README.md says nowhere "PrometheusRule with <N> alerts"`)
	}
	said, _ := strconv.Atoi(string(m[1]))
	if n := len(alerts(t)); said != n {
		t.Errorf("README.md says the PrometheusRule has %d alerts; the rule file %v has %d", said, ruleFile, n)
	}
}
