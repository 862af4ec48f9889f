//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestLibraryChartInHelmCreate follows charts/leader-sidecar-lib/README.md
// in a chart made by `helm create mychart`: the dependency in Chart.yaml,
// `helm dependency build`, templates/rbac.yaml and the Pod template as the
// README shows them (read from the README itself, so the test follows the
// text a user follows), with the example worker as the app. Three Pods run
// with the sidecar as a native sidecar and exactly one leads.
func TestLibraryChartInHelmCreate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	chart, appValues := libChart(t)

	// helm create's values give the app no securityContext; the namespace
	// enforces Pod Security "restricted", so the test gives it one through
	// them.
	values := filepath.Join(filepath.Dir(chart), "restricted.yaml")
	writeFile(t, values, restricted+appValues)
	cl.run(t, ctx, cl.helm, "install", release, chart, "--namespace", ns,
		"--values", values, "--set", "replicaCount=3", "--wait", "--timeout", "2m")
	pods := runningPods(t, ctx, ns, 3, true)
	for _, p := range pods {
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if s.RestartCount != 0 {
				t.Errorf("%s: container %s restarted %d times", p.Name, s.Name, s.RestartCount)
			}
		}
	}
	eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
		_, _, reason := oneLeaderOf(ctx, ns, "demo-mychart", pods)
		return reason == "", reason
	})
}

// libChart makes the chart the README describes (sidecartest's helm
// create chart with the README's lines: the one the chart tests render),
// with the example worker as its app, and returns its path and the values
// that make the app the worker.
func libChart(t *testing.T) (chart, appValues string) {
	t.Helper()
	chart = sidecartest.HelmCreateWithLibrary(t)
	app, err := lastLine(cl.root, "hack/chart-images.sh")
	if err != nil || !strings.HasPrefix(app, "app ") {
		t.Fatalf("the example app's image from hack/chart-images.sh: %q %v", app, err)
	}
	repo, tag, ok := strings.Cut(strings.TrimPrefix(app, "app "), ":")
	if !ok {
		t.Fatalf("the example app's image %q has no tag", app)
	}
	// helm create's app container, with the worker's arguments.
	deployment := filepath.Join(chart, "templates", "deployment.yaml")
	pull := "          imagePullPolicy: {{ .Values.image.pullPolicy }}\n"
	spec := readFile(t, deployment)
	if strings.Count(spec, pull) != 1 {
		t.Fatalf("helm create's Deployment has not one %q:\n%s", pull, spec)
	}
	writeFile(t, deployment, strings.Replace(spec, pull, pull+workerArgs, 1))
	return chart, fmt.Sprintf(workerValues, repo, tag)
}

// restricted is helm create's podSecurityContext and securityContext
// filled in for Pod Security "restricted".
const restricted = `podSecurityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile: {type: RuntimeDefault}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: [ALL]}
`

// workerArgs and workerValues (given the image's repository and tag) make
// helm create's app the example worker, whose image is the one the example
// chart uses by default and hack/cluster-images.sh imports, with its
// results in memory (the app has a read-only root filesystem and no
// volume) and without helm create's HTTP probes (the worker serves none).
const workerArgs = `          args:
            - --sidecar=http://127.0.0.1:4040
            - --db=file:results?mode=memory&cache=shared
            - --resource=example
`

const workerValues = `
image:
  repository: %s
  tag: %s
  pullPolicy: IfNotPresent
livenessProbe: null
readinessProbe: null
`

// codeBlock returns the first fenced code block after the text after.
func codeBlock(t *testing.T, doc, after string) string {
	t.Helper()
	_, rest := cut(t, doc, after)
	_, rest = cut(t, rest, "```yaml\n")
	block, _ := cut(t, rest, "```")
	return block
}

// cut is strings.Cut that fails the test when sep is missing.
func cut(t testing.TB, s, sep string) (string, string) {
	t.Helper()
	before, after, ok := strings.Cut(s, sep)
	if !ok {
		t.Fatalf("%q not found in:\n%s", sep, s)
	}
	return before, after
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	writeFile(t, path, readFile(t, path)+"\n"+text)
}
