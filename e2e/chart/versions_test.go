package chart

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The charts' default images are the release's own, in the registry the
// project publishes to, and every version the charts carry is one version:
// the three charts' version and appVersion, the example's dependency on
// the library, the library's default image tag, the example's image tags
// and the injector's image tag.

var releaseVersion = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// libraryDefaults decodes the settings block of the library's
// leader-sidecar-lib.defaults template (plain YAML) from _config.tpl.
func libraryDefaults(t *testing.T, root string) map[string]any {
	t.Helper()
	tpl := string(sidecartest.MustRead(t, filepath.Join(root, "charts", "leader-sidecar-lib", "templates", "_config.tpl")))
	_, block, ok := strings.Cut(tpl, `{{- define "leader-sidecar-lib.defaults" -}}`)
	block, _, ok2 := strings.Cut(block, "{{- end }}")
	if !ok || !ok2 {
		t.Fatal(`_config.tpl has no leader-sidecar-lib.defaults block`)
	}
	var d map[string]any
	if err := utilyaml.Unmarshal([]byte(block), &d); err != nil {
		t.Fatalf("the library's defaults are not YAML: %v", err)
	}
	return d
}

// exampleImages is the example chart's values: app.image and sidecar.image.
func exampleImages(t *testing.T, root string) (app, sidecar map[string]any) {
	t.Helper()
	var v struct {
		App     struct{ Image map[string]any } `json:"app"`
		Sidecar struct{ Image map[string]any } `json:"sidecar"`
	}
	if err := utilyaml.Unmarshal(sidecartest.MustRead(t, filepath.Join(root, "charts", "leader-sidecar-example", "values.yaml")), &v); err != nil {
		t.Fatal(err)
	}
	return v.App.Image, v.Sidecar.Image
}

// checkVersionsAgree fails t unless every version the charts under root
// carry is version (vX.Y.Z).
func checkVersionsAgree(t *testing.T, root, version string) {
	t.Helper()
	chart := strings.TrimPrefix(version, "v")
	for _, name := range []string{"leader-sidecar-lib", "leader-sidecar-example", "leader-sidecar-injector"} {
		m := sidecartest.ParseChartMeta(t, name, sidecartest.MustRead(t, filepath.Join(root, "charts", name, "Chart.yaml")))
		if m.Version != chart || m.AppVersion != version {
			t.Errorf("%s: version %q appVersion %q, want %q and %q", name, m.Version, m.AppVersion, chart, version)
		}
		if name == "leader-sidecar-example" {
			if len(m.Dependencies) != 1 || m.Dependencies[0].Name != "leader-sidecar-lib" || m.Dependencies[0].Version != chart {
				t.Errorf("%s: dependencies %+v, want leader-sidecar-lib %s", name, m.Dependencies, chart)
			}
		}
	}
	libImage, _ := libraryDefaults(t, root)["image"].(map[string]any)
	if libImage["repository"] != sidecartest.SidecarImageRepository || libImage["tag"] != version {
		t.Errorf("the library's default image is %v:%v, want %s:%s", libImage["repository"], libImage["tag"], sidecartest.SidecarImageRepository, version)
	}
	app, sidecar := exampleImages(t, root)
	if sidecar["repository"] != sidecartest.SidecarImageRepository || sidecar["tag"] != version {
		t.Errorf("the example's sidecar.image is %v:%v, want %s:%s", sidecar["repository"], sidecar["tag"], sidecartest.SidecarImageRepository, version)
	}
	if app["repository"] != sidecartest.AppImageRepository || app["tag"] != version {
		t.Errorf("the example's app.image is %v:%v, want %s:%s", app["repository"], app["tag"], sidecartest.AppImageRepository, version)
	}
	var injector struct{ Image map[string]any }
	if err := utilyaml.Unmarshal(sidecartest.MustRead(t, filepath.Join(root, "charts", "leader-sidecar-injector", "values.yaml")), &injector); err != nil {
		t.Fatal(err)
	}
	if injector.Image["repository"] != sidecartest.SidecarImageRepository || injector.Image["tag"] != version {
		t.Errorf("the injector's image is %v:%v, want %s:%s", injector.Image["repository"], injector.Image["tag"], sidecartest.SidecarImageRepository, version)
	}
}

// TestChartVersionsAgree: the charts carry one version, vX.Y.Z, everywhere,
// and hack/set-version.sh --check says so too.
func TestChartVersionsAgree(t *testing.T) {
	version := sidecartest.ReadChartMeta(t, "leader-sidecar-lib").AppVersion
	if !releaseVersion.MatchString(version) {
		t.Fatalf("the library's appVersion %q is not vX.Y.Z", version)
	}
	checkVersionsAgree(t, "../..", version)
	if out, err := exec.Command("../../hack/set-version.sh", "--check", version).CombinedOutput(); err != nil {
		t.Fatalf("hack/set-version.sh --check %s: %v\n%s", version, err, out)
	}
}

// TestChartDefaultImages renders the example chart with its defaults and
// the library with its own (in a helm create chart): the images are the
// release's, and hack/chart-images.sh and hack/cluster-images.sh --refs
// (the references the one-node cluster's images are imported under) name
// exactly those.
func TestChartDefaultImages(t *testing.T) {
	version := sidecartest.ReadChartMeta(t, "leader-sidecar-example").AppVersion
	wantSidecar, wantApp := sidecartest.SidecarImageRepository+":"+version, sidecartest.AppImageRepository+":"+version

	pod := sidecartest.One[*appsv1.Deployment](t, sidecartest.RenderChart(t, sidecartest.Charts(t), "apps", "{}\n")).Spec.Template.Spec
	if got := imagesOf(pod); got["leader-sidecar"] != wantSidecar || got["app"] != wantApp {
		t.Fatalf("the example chart's default images: %v, want leader-sidecar %s and app %s", got, wantSidecar, wantApp)
	}
	lib, err := sidecartest.TemplateMyChart(t, sidecartest.HelmCreateWithLibrary(t))
	if err != nil {
		t.Fatal(err)
	}
	libPod := sidecartest.One[*appsv1.Deployment](t, lib).Spec.Template.Spec
	if got := imagesOf(libPod)["leader-sidecar"]; got != wantSidecar {
		t.Fatalf("the library's default sidecar image: %q, want %s", got, wantSidecar)
	}

	out, err := exec.Command("../../hack/chart-images.sh").Output()
	if err != nil {
		t.Fatalf("hack/chart-images.sh: %v", stderrOf(err))
	}
	if got, want := string(out), "sidecar "+wantSidecar+"\napp "+wantApp+"\n"; got != want {
		t.Fatalf("hack/chart-images.sh printed\n%swant\n%s", got, want)
	}
	out, err = exec.Command("../../hack/cluster-images.sh", "--refs").Output()
	if err != nil {
		t.Fatalf("hack/cluster-images.sh --refs: %v", stderrOf(err))
	}
	refs := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(refs) != 3 || refs[0] != wantSidecar || refs[1] != wantApp || !strings.HasPrefix(refs[2], "registry.k8s.io/pause:") {
		t.Fatalf("hack/cluster-images.sh --refs: %q, want %s, %s and the pause image", refs, wantSidecar, wantApp)
	}
}

// TestSetVersion runs hack/set-version.sh on a copy of the charts: it
// refuses a version that is not vX.Y.Z (exit 2, naming it), moves every
// place to the new version, its --check then agrees and names every place
// that the old version no longer matches, and the example chart renders the
// new version's images.
func TestSetVersion(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "charts"), os.DirFS("../../charts")); err != nil {
		t.Fatal(err)
	}
	// What an earlier helm dependency build left in the source tree (not
	// part of the repository) would pin the old version.
	example := filepath.Join(root, "charts", "leader-sidecar-example")
	if err := errors.Join(os.RemoveAll(filepath.Join(example, "Chart.lock")), os.RemoveAll(filepath.Join(example, "charts"))); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "hack", "set-version.sh")
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, sidecartest.MustRead(t, "../../hack/set-version.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := sidecartest.ReadChartMeta(t, "leader-sidecar-lib").AppVersion
	const next = "v9.8.7"
	run := func(args ...string) (string, int) {
		out, err := exec.Command(script, args...).CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}

	for _, bad := range []string{"9.8.7", "v9.8", "v09.8.7", "v9.8.7-rc.1", "latest", ""} {
		out, code := run(bad)
		if code != 2 || !strings.Contains(out, `version "`+bad+`" is not of the form vX.Y.Z`) {
			t.Fatalf("set-version.sh %q: exit %d\n%s", bad, code, out)
		}
	}
	checkVersionsAgree(t, root, old) // nothing written so far

	if out, code := run(next); code != 0 {
		t.Fatalf("set-version.sh %s: exit %d\n%s", next, code, out)
	}
	checkVersionsAgree(t, root, next)
	if out, code := run("--check", next); code != 0 {
		t.Fatalf("--check %s after setting it: exit %d\n%s", next, code, out)
	}
	out, code := run("--check", old)
	named := regexp.MustCompile(` is v?` + regexp.QuoteMeta(strings.TrimPrefix(next, "v")) + `, not `)
	if code != 2 || len(named.FindAllString(out, -1)) != 11 {
		t.Fatalf("--check %s after setting %s: exit %d, want 2 naming all 11 places:\n%s", old, next, code, out)
	}
	for _, readme := range []string{"leader-sidecar-lib", "leader-sidecar-example", "leader-sidecar-injector"} {
		text := string(sidecartest.MustRead(t, filepath.Join(root, "charts", readme, "README.md")))
		if strings.Contains(text, strings.TrimPrefix(old, "v")) {
			t.Errorf("%s/README.md still names %s after set-version.sh %s", readme, old, next)
		}
	}

	dir := filepath.Join(root, "charts")
	if _, err := sidecartest.RunHelm(t, "dependency", "build", filepath.Join(dir, "leader-sidecar-example")); err != nil {
		t.Fatal(err)
	}
	pod := sidecartest.One[*appsv1.Deployment](t, sidecartest.RenderChart(t, dir, "apps", "{}\n")).Spec.Template.Spec
	if got := imagesOf(pod); got["leader-sidecar"] != sidecartest.SidecarImageRepository+":"+next || got["app"] != sidecartest.AppImageRepository+":"+next {
		t.Fatalf("after set-version.sh %s the images are %v", next, got)
	}
}

// imagesOf maps each container of a Pod (init containers too) to its image.
func imagesOf(pod corev1.PodSpec) map[string]string {
	m := map[string]string{}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		m[c.Name] = c.Image
	}
	return m
}

// stderrOf is a failed command's error with its stderr.
func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return err.Error() + "\n" + string(exit.Stderr)
	}
	return err.Error()
}
