package chart

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// Both charts, and a chart made by `helm create` with the library as its
// README says, lint clean (helm lint --strict: no warning, no error) on
// Helm 3 and on Helm 4, each making its own helm create chart, over the
// settings that take the templates' every branch and with the optional
// objects on.

// TestChartLint lints both charts with the pinned helm, and the example
// chart with every case of the matrix.
func TestChartLint(t *testing.T) {
	dir := sidecartest.Charts(t)
	for _, chart := range []string{"leader-sidecar-lib", "leader-sidecar-example"} {
		t.Run(chart, func(t *testing.T) {
			out, err := sidecartest.RunHelm(t, "lint", "--strict", filepath.Join(dir, chart))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
				t.Fatalf("helm lint --strict:\n%s", out)
			}
		})
	}
	// Lint with each readiness mode and backend, so every branch of the
	// templates is linted.
	for _, c := range sidecartest.ChartMatrix() {
		file := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(file, []byte(c.Values()), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := sidecartest.RunHelm(t, "lint", "--strict", filepath.Join(dir, "leader-sidecar-example"), "--values", file); err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		} else if strings.Contains(out, "[WARNING]") {
			t.Fatalf("%s:\n%s", c.Name(), out)
		}
	}
}

// helmRunner runs one helm binary, with its own cache, config and data
// directories, and returns stdout or stderr as the error.
type helmRunner struct {
	bin, home string
}

func (h helmRunner) run(args ...string) (string, error) {
	cmd := exec.Command(h.bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(h.home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h.home, "config"), "HELM_DATA_HOME="+filepath.Join(h.home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v\n%s%s", filepath.Base(h.bin), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// version is what the binary says it is.
func (h helmRunner) version(t *testing.T) string {
	t.Helper()
	v, err := h.run("version", "--template", "{{.Version}}")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// chartsWith copies charts/ and builds the example's dependency with h; then
// makes mychart with h's own `helm create`, changed as the library's
// README says (as helmCreateWithLibrary does with Helm 3), with
// templates/extras.yaml too. It returns the copy's directory and mychart.
func chartsWith(t *testing.T, h helmRunner) (dir, mychart string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "charts")
	if err := os.CopyFS(dir, os.DirFS("../../charts")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.run("dependency", "build", filepath.Join(dir, "leader-sidecar-example")); err != nil {
		t.Fatal(err)
	}
	mychart = filepath.Join(dir, "mychart")
	if _, err := h.run("create", mychart); err != nil {
		t.Fatal(err)
	}
	chartYAML := string(sidecartest.MustRead(t, filepath.Join(mychart, "Chart.yaml")))
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(mychart, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Chart.yaml", chartYAML+"\n"+sidecartest.ReadmeBlock(t, "dependencies:", "leader-sidecar-lib"))
	write("templates/rbac.yaml", sidecartest.ReadmeBlock(t, `include "leader-sidecar-lib.rbac"`))
	write("templates/extras.yaml", sidecartest.ReadmeBlock(t, `include "leader-sidecar-lib.extras"`))
	created := string(sidecartest.MustRead(t, filepath.Join(mychart, "templates", "deployment.yaml")))
	pod := sidecartest.ReadmeBlock(t, "serviceAccountName:", "leader-sidecar-lib.initContainers", "leader-sidecar-lib.strategy")
	header, rest := sidecartest.MustCut(t, created, "  template:\n")
	podMeta, _ := sidecartest.MustCut(t, rest, "    spec:\n")
	strategy, podSpec := sidecartest.MustCut(t, strings.TrimPrefix(pod, "spec:\n"), "  template:\n")
	_, podSpec = sidecartest.MustCut(t, podSpec, "    spec:\n")
	write("templates/deployment.yaml", header+strategy+"  template:\n"+podMeta+"    spec:\n"+podSpec)
	if _, err := h.run("dependency", "build", mychart); err != nil {
		t.Fatal(err)
	}
	return dir, mychart
}

// lintClean runs helm lint --strict with values and fails t on an error or
// a warning.
func lintClean(t *testing.T, h helmRunner, chart, values string) {
	t.Helper()
	args := []string{"lint", "--strict", chart}
	if values != "" {
		file := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--values", file)
	}
	out, err := h.run(args...)
	if err != nil {
		t.Fatalf("%s %s:\n%v", filepath.Base(chart), strings.TrimSpace(values), err)
	}
	if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") || !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
		t.Fatalf("%s %s: helm lint --strict is not clean:\n%s", filepath.Base(chart), strings.TrimSpace(values), out)
	}
}

// extrasOn turns every optional object and Pod setting on.
const extrasOn = `podDisruptionBudget:
  enabled: true
serviceMonitor:
  enabled: true
  interval: 30s
priorityClassName: leaders
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}
imagePullSecrets: [mirror-credentials]
`

func TestChartLintHelm3AndHelm4(t *testing.T) {
	for _, c := range []struct {
		major string
		bin   func(testing.TB) string
	}{{"v3.", sidecartest.Helm}, {"v4.", sidecartest.Helm4}} {
		t.Run("helm "+strings.TrimSuffix(c.major, "."), func(t *testing.T) {
			h := helmRunner{bin: c.bin(t), home: t.TempDir()}
			if v := h.version(t); !strings.HasPrefix(v, c.major) {
				t.Fatalf("%s is helm %s, want %s*", h.bin, v, c.major)
			}
			dir, mychart := chartsWith(t, h)
			lintClean(t, h, filepath.Join(dir, "leader-sidecar-lib"), "")
			example := filepath.Join(dir, "leader-sidecar-example")
			lintClean(t, h, example, "")
			for _, m := range sidecartest.ChartMatrix() {
				lintClean(t, h, example, m.Values())
			}
			lintClean(t, h, example, extrasOn+"sidecar:\n  image:\n    digest: sha256:"+strings.Repeat("0", 64)+"\n")
			lintClean(t, h, example, "podMonitor:\n  enabled: true\npodDisruptionBudget:\n  enabled: true\n  minAvailable: 50%\n")

			lintClean(t, h, mychart, "")
			lintClean(t, h, mychart, "sidecar:\n  readiness:\n    mode: pod-condition\n")
			lintClean(t, h, mychart, "sidecar:\n  backend: sqlite\n  native: false\n")
			lintClean(t, h, mychart, extrasOn)
			lintClean(t, h, mychart, "podMonitor:\n  enabled: true\n")
		})
	}
}
