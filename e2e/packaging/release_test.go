package packaging

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// hack/release.sh (make release VERSION=vX.Y.Z): every artifact a release
// publishes, checked for what it must be; and the versions it refuses.

// runRelease runs hack/release.sh of this repository into dir with
// VERSION=version and returns its stdout, stderr and exit status.
func runRelease(t *testing.T, dir, version string) (stdout, stderr string, code int) {
	t.Helper()
	return runReleaseIn(t, "../..", dir, version)
}

// runReleaseIn is runRelease with the hack/release.sh of the repository at
// root.
func runReleaseIn(t *testing.T, root, dir, version string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "hack", "release.sh"), dir)
	cmd.Env = append(append(os.Environ(), gitIdentity...), "VERSION="+version, "HELM="+sidecartest.Helm(t),
		"PATH="+filepath.Dir(sidecartest.GoTool())+":"+os.Getenv("PATH"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errOut.String(), exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}

// TestReleaseRefusesOtherVersions: a VERSION that is not vX.Y.Z, or that is
// not the version the charts carry, exits 2 with a message that says so,
// before anything is built.
func TestReleaseRefusesOtherVersions(t *testing.T) {
	current := sidecartest.ReadChartMeta(t, "leader-sidecar-lib").AppVersion
	for _, c := range []struct{ version, want string }{
		{"", `VERSION "" is not of the form vX.Y.Z`},
		{"0.1.0", `VERSION "0.1.0" is not of the form vX.Y.Z`},
		{"v1.2", `VERSION "v1.2" is not of the form vX.Y.Z`},
		{"d509e48-dirty", `VERSION "d509e48-dirty" is not of the form vX.Y.Z`},
		{"v99.0.0", "appVersion is " + current + ", not v99.0.0"},
		{"v99.0.0", "sidecar.image.tag is " + current + ", not v99.0.0"},
		{"v99.0.0", "VERSION v99.0.0 differs from the versions the charts carry"},
	} {
		dir := t.TempDir()
		_, stderr, code := runRelease(t, dir, c.version)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("VERSION=%q: exit %d, want 2 and %q in:\n%s", c.version, code, c.want, stderr)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("VERSION=%q: a refused release wrote %d files", c.version, len(entries))
		}
	}
}

// TestRelease runs hack/release.sh for the charts' version and checks every
// artifact: four archives of the right binary for their OS and
// architecture with LICENSE and README, SHA256SUMS matching every file, the
// charts packaged with the release's version and appVersion, the images,
// and the kubectl plugin's krew manifest, which names the four archives
// with their checksums.
func TestRelease(t *testing.T) {
	version := sidecartest.ReadChartMeta(t, "leader-sidecar-lib").AppVersion
	chartVersion := strings.TrimPrefix(version, "v")
	dir := t.TempDir()
	repo := releaseRepo(t)
	stdout, stderr, code := runReleaseIn(t, repo, dir, version)
	if code != 0 {
		t.Fatalf("hack/release.sh: exit %d\n%s", code, stderr)
	}
	checkReleaseTags(t, repo, version)
	want := []string{
		"SHA256SUMS",
		"example-worker-" + version + ".oci.tar",
		"leader-sidecar-" + version + "-darwin-amd64.tar.gz",
		"leader-sidecar-" + version + "-darwin-arm64.tar.gz",
		"leader-sidecar-" + version + "-linux-amd64.tar.gz",
		"leader-sidecar-" + version + "-linux-arm64.tar.gz",
		"leader-sidecar-" + version + ".oci.tar",
		"leader-sidecar-example-" + chartVersion + ".tgz",
		"leader-sidecar-injector-" + chartVersion + ".tgz",
		"leader-sidecar-lib-" + chartVersion + ".tgz",
		"plugins/leader.yaml",
	}
	sort.Strings(want)
	var got, printed []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		got = append(got, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(stdout) {
		printed = append(printed, strings.TrimPrefix(p, dir+"/"))
	}
	sort.Strings(printed)
	if !slices.Equal(got, want) || !slices.Equal(printed, want) {
		t.Fatalf("dist holds %q and release.sh printed %q, want exactly %q", got, printed, want)
	}

	for _, osArch := range []string{"linux-amd64", "linux-arm64", "darwin-amd64", "darwin-arm64"} {
		checkBinaryArchive(t, filepath.Join(dir, "leader-sidecar-"+version+"-"+osArch+".tar.gz"), version, osArch)
	}
	checkSums(t, dir, want)
	checkPluginManifest(t, dir, version)
	for _, chart := range []string{"leader-sidecar-lib", "leader-sidecar-example", "leader-sidecar-injector"} {
		files := untgz(t, filepath.Join(dir, chart+"-"+chartVersion+".tgz"))
		m := sidecartest.ParseChartMeta(t, chart, files[chart+"/Chart.yaml"])
		if m.Name != chart || m.Version != chartVersion || m.AppVersion != version {
			t.Errorf("%s.tgz: Chart.yaml name %q version %q appVersion %q, want %s %s %s", chart, m.Name, m.Version, m.AppVersion, chart, chartVersion, version)
		}
		if chart == "leader-sidecar-example" {
			lib, ok := files[chart+"/charts/leader-sidecar-lib/Chart.yaml"]
			if !ok {
				t.Fatalf("%s.tgz does not bundle leader-sidecar-lib", chart)
			}
			if m := sidecartest.ParseChartMeta(t, "bundled leader-sidecar-lib", lib); m.Version != chartVersion || m.AppVersion != version {
				t.Errorf("%s.tgz bundles leader-sidecar-lib %s (appVersion %s), want %s", chart, m.Version, m.AppVersion, chartVersion)
			}
		}
	}
	checkImageIndex(t, filepath.Join(dir, "leader-sidecar-"+version+".oci.tar"), sidecartest.SidecarImageRepository, version, "sidecar")
	checkImageIndex(t, filepath.Join(dir, "example-worker-"+version+".oci.tar"), sidecartest.AppImageRepository, version, "worker")
}

// releaseRepo is a repository of its own holding this working tree's files
// (tracked and untracked, not ignored) as one commit, for hack/release.sh
// to tag without touching this repository's tags.
func releaseRepo(t *testing.T) string {
	t.Helper()
	list, err := exec.Command("git", "-C", "../..", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		raw, err := os.ReadFile(filepath.Join("../..", name))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted, not yet committed
		} else if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join("../..", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(repo, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, name), raw, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	git(t, repo, "init", "--quiet")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "--quiet", "-m", "release test")
	return repo
}

// gitIdentity is who commits and tags in the test's repositories, the
// release's tags included: a machine whose git knows no user must pass.
var gitIdentity = []string{"GIT_AUTHOR_NAME=release test", "GIT_AUTHOR_EMAIL=release@example.invalid",
	"GIT_COMMITTER_NAME=release test", "GIT_COMMITTER_EMAIL=release@example.invalid"}

// git runs git in repo as gitIdentity and returns its output.
func git(t *testing.T, repo string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	cmd.Env = append(os.Environ(), gitIdentity...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// checkReleaseTags fails t unless the repository at repo has the annotated
// tags vX.Y.Z and pkg/fence/vX.Y.Z on HEAD.
func checkReleaseTags(t *testing.T, repo, version string) {
	t.Helper()
	head := git(t, repo, "rev-parse", "HEAD")
	for _, tag := range []string{version, "pkg/fence/" + version} {
		if kind := git(t, repo, "cat-file", "-t", "refs/tags/"+tag); kind != "tag" {
			t.Errorf("%s is a %s, want an annotated tag", tag, kind)
		}
		if at := git(t, repo, "rev-parse", "refs/tags/"+tag+"^{commit}"); at != head {
			t.Errorf("%s names %s, want HEAD %s", tag, at, head)
		}
	}
}

// TestReleaseRefusesWhatItCannotTag: uncommitted changes, and a version
// tag on another commit, exit 2 naming the cause before anything is
// built or tagged.
func TestReleaseRefusesWhatItCannotTag(t *testing.T) {
	version := sidecartest.ReadChartMeta(t, "leader-sidecar-lib").AppVersion
	repo := releaseRepo(t)
	if err := os.WriteFile(filepath.Join(repo, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, stderr, code := runReleaseIn(t, repo, dir, version); code != 2 || !strings.Contains(stderr, "the working tree has uncommitted changes") {
		t.Errorf("a dirty tree: exit %d, want 2 naming the uncommitted changes:\n%s", code, stderr)
	}
	git(t, repo, "commit", "--quiet", "-am", "a change")
	git(t, repo, "tag", "-a", "-m", "elsewhere", "pkg/fence/"+version, "HEAD~1")
	if _, stderr, code := runReleaseIn(t, repo, dir, version); code != 2 || !strings.Contains(stderr, "tag pkg/fence/"+version+" already names commit") {
		t.Errorf("a tag on another commit: exit %d, want 2 naming the tag:\n%s", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused release wrote %d files", len(entries))
	}
	if tags := git(t, repo, "tag", "--list", version); tags != "" {
		t.Errorf("a refused release tagged %q", tags)
	}
}

// checkBinaryArchive checks one binary archive: a directory named after it
// holding exactly sidecar, LICENSE and README.md; the binary is for osArch,
// and the one for this machine prints the release's version.
func checkBinaryArchive(t *testing.T, path, version, osArch string) {
	t.Helper()
	files := untgz(t, path)
	top := strings.TrimSuffix(filepath.Base(path), ".tar.gz")
	var names []string
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	if want := []string{top + "/LICENSE", top + "/README.md", top + "/sidecar"}; !slices.Equal(names, want) {
		t.Fatalf("%s holds %q, want %q", filepath.Base(path), names, want)
	}
	for _, doc := range []string{"LICENSE", "README.md"} {
		if !bytes.Equal(files[top+"/"+doc], sidecartest.MustRead(t, "../../"+doc)) {
			t.Errorf("%s: %s is not the repository's", filepath.Base(path), doc)
		}
	}
	bin := files[top+"/sidecar"]
	switch osArch {
	case "linux-amd64":
		checkStaticELF(t, bin, elf.EM_X86_64)
	case "linux-arm64":
		checkStaticELF(t, bin, elf.EM_AARCH64)
	case "darwin-amd64":
		checkMachO(t, bin, macho.CpuAmd64)
	case "darwin-arm64":
		checkMachO(t, bin, macho.CpuArm64)
	}
	if osArch == runtime.GOOS+"-"+runtime.GOARCH {
		exe := filepath.Join(t.TempDir(), "sidecar")
		if err := os.WriteFile(exe, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(exe, "--version").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "sidecar "+version {
			t.Fatalf("%s: sidecar --version: %v %q, want \"sidecar %s\"", filepath.Base(path), err, out, version)
		}
	}
}

func checkMachO(t *testing.T, data []byte, cpu macho.Cpu) {
	t.Helper()
	f, err := macho.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not a Mach-O file: %v", err)
	}
	defer f.Close()
	if f.Cpu != cpu || f.Type != macho.TypeExec {
		t.Fatalf("Mach-O %v %v, want an executable for %v", f.Type, f.Cpu, cpu)
	}
}

// checkSums checks SHA256SUMS: one line per other file, each hash right.
func checkSums(t *testing.T, dir string, files []string) {
	t.Helper()
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(sidecartest.MustRead(t, filepath.Join(dir, "SHA256SUMS"))))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("SHA256SUMS: line %q is not \"<sha256>  <file>\"", sc.Text())
		}
		sums[name] = sum
	}
	for _, f := range files {
		if f == "SHA256SUMS" {
			continue
		}
		sum := sha256.Sum256(sidecartest.MustRead(t, filepath.Join(dir, f)))
		if sums[f] != hex.EncodeToString(sum[:]) {
			t.Errorf("SHA256SUMS: %s has %q, the file hashes to %x", f, sums[f], sum)
		}
		delete(sums, f)
	}
	if len(sums) != 0 {
		t.Errorf("SHA256SUMS names files that are not in the release: %v", sums)
	}
}

// untgz returns the regular files of a gzip-compressed tar archive.
func untgz(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = data
		}
	}
}
