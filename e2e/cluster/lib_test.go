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
)

// TestLibraryChartInHelmCreate follows charts/leader-sidecar-lib/README.md
// in a chart made by `helm create myapp`: the dependency in Chart.yaml,
// `helm dependency build`, templates/rbac.yaml and the Pod template as the
// README shows them (read from the README itself, so the test follows the
// text a user follows), with the example worker as the app. Three Pods run
// with the sidecar as a native sidecar and exactly one leads.
func TestLibraryChartInHelmCreate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	chart := libChart(t, ctx)

	// helm create's values give the app no securityContext; the namespace
	// enforces Pod Security "restricted", so the test gives it one through
	// them.
	values := filepath.Join(filepath.Dir(chart), "restricted.yaml")
	writeFile(t, values, restricted)
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
		_, _, reason := oneLeaderOf(ctx, ns, "demo-myapp", pods)
		return reason == "", reason
	})
}

// libChart makes the chart the README describes, in a directory of the
// test, and returns its path.
func libChart(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	cl.run(t, ctx, cl.helm, "create", filepath.Join(dir, "myapp"))
	chart := filepath.Join(dir, "myapp")
	readme := readFile(t, filepath.Join(cl.root, "charts", "leader-sidecar-lib", "README.md"))

	lib := filepath.Join(cl.root, "charts", "leader-sidecar-lib")
	dep := codeBlock(t, readme, "`Chart.yaml` of your chart:")
	dep = strings.Replace(dep, `"file://../leader-sidecar-lib"`, `"file://`+lib+`"`, 1)
	appendFile(t, filepath.Join(chart, "Chart.yaml"), dep)
	writeFile(t, filepath.Join(chart, "templates", "rbac.yaml"), codeBlock(t, readme, "`templates/rbac.yaml`"))

	// The Deployment: helm create's header, selector and Pod metadata; the
	// README's strategy and Pod spec; the worker as the app.
	created := readFile(t, filepath.Join(chart, "templates", "deployment.yaml"))
	pod := codeBlock(t, readme, "The Pod template of your Deployment:")
	header, rest := cut(t, created, "  template:\n")
	podMeta, _ := cut(t, rest, "    spec:\n")
	strategy, podSpec := cut(t, pod, "  template:\n")
	strategy = strings.TrimPrefix(strategy, "spec:\n")
	_, podSpec = cut(t, podSpec, "    spec:\n")
	app, err := lastLine(cl.root, "hack/chart-images.sh")
	if err != nil || !strings.HasPrefix(app, "app ") {
		t.Fatalf("the example app's image from hack/chart-images.sh: %q %v", app, err)
	}
	podSpec = strings.Replace(podSpec, "          image: my/app\n", fmt.Sprintf(workerApp, strings.TrimPrefix(app, "app ")), 1)
	if !strings.Contains(podSpec, "example-worker") {
		t.Fatalf("no app container with image my/app in the README's Pod template:\n%s", pod)
	}
	writeFile(t, filepath.Join(chart, "templates", "deployment.yaml"),
		header+strategy+"  template:\n"+podMeta+"    spec:\n"+podSpec)
	cl.run(t, ctx, cl.helm, "dependency", "build", chart)
	return chart
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

// workerApp is the app container's image in place of the README's my/app:
// the example worker, whose image (%s) is the one the example chart uses by
// default and hack/cluster-images.sh imports, with its results in memory
// (the app has a read-only root filesystem and no volume).
const workerApp = `          image: %s
          imagePullPolicy: IfNotPresent
          args:
            - --sidecar=http://127.0.0.1:4040
            - --db=file:results?mode=memory&cache=shared
            - --resource=example
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
func cut(t *testing.T, s, sep string) (string, string) {
	t.Helper()
	before, after, ok := strings.Cut(s, sep)
	if !ok {
		t.Fatalf("%q not found in:\n%s", sep, s)
	}
	return before, after
}

func readFile(t *testing.T, path string) string {
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
