package sidecartest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The library chart inside someone else's chart: a chart made by
// `helm create mychart`, changed exactly as charts/leader-sidecar-lib/README.md
// says, with the README's own code blocks.

// TokenMountPath is where the kubelet mounts a ServiceAccount token.
const TokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// libReadmeBlocks returns the fenced yaml blocks of the library's README.
func libReadmeBlocks(t testing.TB) []string {
	t.Helper()
	raw, err := os.ReadFile(RepoPath(t, "charts", "leader-sidecar-lib", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// ReadmeBlock is the one README block that contains every marker.
func ReadmeBlock(t testing.TB, markers ...string) string {
	t.Helper()
	var found []string
	for _, b := range libReadmeBlocks(t) {
		if !slices.ContainsFunc(markers, func(m string) bool { return !strings.Contains(b, m) }) {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the library README has %d yaml blocks with %q, want 1", len(found), markers)
	}
	return found[0]
}

// HelmCreateWithLibrary makes mychart with helm create in a copy of charts/
// and adds the library as its README says; it returns the chart's
// directory.
func HelmCreateWithLibrary(t testing.TB) string {
	t.Helper()
	dir := Charts(t)
	if _, err := RunHelm(t, "create", filepath.Join(dir, "mychart")); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(dir, "mychart")
	f, err := os.OpenFile(filepath.Join(chart, "Chart.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("\n" + ReadmeBlock(t, "dependencies:", "leader-sidecar-lib"))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(chart, "templates", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("rbac.yaml", ReadmeBlock(t, `include "leader-sidecar-lib.rbac"`))

	// helm create's Deployment with the README's strategy and Pod spec:
	// its header, selector and Pod metadata are kept.
	created, err := os.ReadFile(filepath.Join(chart, "templates", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pod := ReadmeBlock(t, "serviceAccountName:", "leader-sidecar-lib.initContainers", "leader-sidecar-lib.strategy")
	header, rest := MustCut(t, string(created), "  template:\n")
	podMeta, createdSpec := MustCut(t, rest, "    spec:\n")
	strategy, podSpec := MustCut(t, strings.TrimPrefix(pod, "spec:\n"), "  template:\n")
	_, podSpec = MustCut(t, podSpec, "    spec:\n")
	checkKeepsValues(t, createdSpec, podSpec)
	write("deployment.yaml", header+strategy+"  template:\n"+podMeta+"    spec:\n"+podSpec)
	if _, err := RunHelm(t, "dependency", "build", chart); err != nil {
		t.Fatal(err)
	}
	return chart
}

// checkKeepsValues fails t unless the README's Pod spec reads every value
// helm create's Pod spec reads (its container, volumes, pull secrets,
// scheduling): the recipe adds the sidecar to the user's Pod and takes
// nothing of it away.
func checkKeepsValues(t testing.TB, created, readme string) {
	t.Helper()
	ref := regexp.MustCompile(`\.(Values\.[A-Za-z.]+|Chart\.[A-Za-z]+)`)
	for _, m := range ref.FindAllString(created, -1) {
		if !strings.Contains(readme, m) {
			t.Errorf("the library README's Pod spec does not read %s, which helm create's Pod spec does", m)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// MustCut is strings.Cut that fails t when sep is not in s.
func MustCut(t testing.TB, s, sep string) (string, string) {
	t.Helper()
	before, after, ok := strings.Cut(s, sep)
	if !ok {
		t.Fatalf("%q not found in:\n%s", sep, s)
	}
	return before, after
}

// TemplateMyChart renders chart as release shop in namespace apps, with
// each of set as a --set.
func TemplateMyChart(t testing.TB, chart string, set ...string) (*Rendered, error) {
	t.Helper()
	args := []string{"template", "shop", chart, "--namespace", "apps"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := RunHelm(t, args...)
	if err != nil {
		return nil, err
	}
	return DecodeManifests(t, out), nil
}

// CheckTokenVolume fails t unless v is what the kubelet would mount for an
// automounted token (token, ca.crt, namespace), so the sidecar's
// in-cluster client works.
func CheckTokenVolume(t testing.TB, v corev1.Volume) {
	t.Helper()
	var token, ca, namespace bool
	for _, s := range v.Projected.Sources {
		switch {
		case s.ServiceAccountToken != nil:
			token = s.ServiceAccountToken.Path == "token" && s.ServiceAccountToken.Audience == ""
		case s.ConfigMap != nil:
			ca = s.ConfigMap.Name == "kube-root-ca.crt" && len(s.ConfigMap.Items) == 1 && s.ConfigMap.Items[0].Path == "ca.crt"
		case s.DownwardAPI != nil:
			namespace = len(s.DownwardAPI.Items) == 1 && s.DownwardAPI.Items[0].Path == "namespace" &&
				s.DownwardAPI.Items[0].FieldRef != nil && s.DownwardAPI.Items[0].FieldRef.FieldPath == "metadata.namespace"
		}
	}
	if !token || !ca || !namespace {
		t.Fatalf("token volume %+v: token %v, ca.crt %v, namespace %v", v.Projected, token, ca, namespace)
	}
}

// HelmCreateWithExtras is HelmCreateWithLibrary plus templates/extras.yaml
// from the library's README.
func HelmCreateWithExtras(t testing.TB) string {
	t.Helper()
	chart := HelmCreateWithLibrary(t)
	extras := ReadmeBlock(t, `include "leader-sidecar-lib.extras"`)
	if err := os.WriteFile(filepath.Join(chart, "templates", "extras.yaml"), []byte(extras), 0o644); err != nil {
		t.Fatal(err)
	}
	return chart
}
