package packaging

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The release images (hack/image.sh, what `make image` runs): built without
// a container engine, one OCI image index per image with a manifest for
// linux/amd64 and one for linux/arm64, holding what the Dockerfile's image
// holds, and reproducible; and the binary the Dockerfile builds, run in an
// empty root as the image's user.

const imageTestVersion = "image-test"

// buildImages runs hack/image.sh into a new directory and returns the
// sidecar's and the example worker's archives.
func buildImages(t *testing.T) (sidecar, worker string) {
	t.Helper()
	sidecar, worker, err := buildImagesInto(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return sidecar, worker
}

// firstImages is one build of the images, shared by the test that checks
// a build (TestImageArchive) and the one that compares two
// (TestImageReproducible); TestMain removes it.
var firstImages struct {
	once            sync.Once
	dir             string
	sidecar, worker string
	err             error
}

// sharedImages is firstImages, built by the first test that asks.
func sharedImages(t *testing.T) (sidecar, worker string) {
	t.Helper()
	firstImages.once.Do(func() {
		if firstImages.dir, firstImages.err = os.MkdirTemp("", "leader-sidecar-images"); firstImages.err == nil {
			firstImages.sidecar, firstImages.worker, firstImages.err = buildImagesInto(firstImages.dir)
		}
	})
	if firstImages.err != nil {
		t.Fatal(firstImages.err)
	}
	return firstImages.sidecar, firstImages.worker
}

func removeSharedImages() {
	if firstImages.dir != "" {
		_ = os.RemoveAll(firstImages.dir)
	}
}

// buildImagesInto runs hack/image.sh into dir and returns the sidecar's
// and the example worker's archives.
func buildImagesInto(dir string) (sidecar, worker string, err error) {
	cmd := exec.Command("../../hack/image.sh", dir)
	cmd.Env = append(os.Environ(), "VERSION="+imageTestVersion, "PATH="+filepath.Dir(sidecartest.GoTool())+":"+os.Getenv("PATH"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("hack/image.sh: %v\n%s", err, stderr.String())
	}
	sidecar = filepath.Join(dir, "leader-sidecar-"+imageTestVersion+".oci.tar")
	worker = filepath.Join(dir, "example-worker-"+imageTestVersion+".oci.tar")
	if got, want := strings.Fields(string(out)), []string{sidecar, worker}; !slices.Equal(got, want) {
		return "", "", fmt.Errorf("hack/image.sh printed %q, want the archives' paths %q", got, want)
	}
	return sidecar, worker, nil
}

// checkImageIndex checks an archive built by hack/image.sh: one entry, an
// image index named repository:version, with exactly linux/amd64 and
// linux/arm64, each a non-root image with entrypoint /<binary> on the
// distroless-like base. It returns each platform's image.
func checkImageIndex(t *testing.T, archive, repository, version, binary string) map[string]ociImage {
	t.Helper()
	a := readOCIArchive(t, archive)
	top := a.index(t)
	if len(top.Manifests) != 1 {
		t.Fatalf("%s: index.json has %d entries, want 1", archive, len(top.Manifests))
	}
	entry := top.Manifests[0]
	if entry.MediaType != ociIndexType {
		t.Fatalf("%s: the image is a %s, want an image index", archive, entry.MediaType)
	}
	if got := entry.Annotations["io.containerd.image.name"]; got != repository+":"+version {
		t.Fatalf("%s: io.containerd.image.name %q, want %s:%s", archive, got, repository, version)
	}
	if got := entry.Annotations["org.opencontainers.image.ref.name"]; got != version {
		t.Fatalf("%s: org.opencontainers.image.ref.name %q, want %s", archive, got, version)
	}
	var idx ociIndex
	a.decode(t, "image index", a.blob(t, entry), &idx)
	if got := platforms(idx); !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("%s: platforms %q, want exactly linux/amd64 and linux/arm64", archive, got)
	}

	images := map[string]ociImage{}
	for _, m := range idx.Manifests {
		// Tools that predate OCI 1.1 (skopeo 1.9) drop an artifactType
		// when they copy an index, and so change its digest.
		if m.ArtifactType != "" {
			t.Fatalf("%s: the %s manifest is described as an artifact of type %s", archive, m.Platform, m.ArtifactType)
		}
		img := a.image(t, m)
		c := img.config
		if c.ociPlatform != *m.Platform {
			t.Fatalf("%s: the config says %s, the index %s", archive, c.ociPlatform, m.Platform)
		}
		if c.Config.User != "65532:65532" || !slices.Equal(c.Config.Entrypoint, []string{"/" + binary}) || len(c.Config.Cmd) != 0 {
			t.Fatalf("%s %s: user %q entrypoint %q cmd %q, want 65532:65532 and [/%s]", archive, c.ociPlatform, c.Config.User, c.Config.Entrypoint, c.Config.Cmd, binary)
		}
		if !slices.Contains(c.Config.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt") {
			t.Fatalf("%s: env %q", archive, c.Config.Env)
		}
		if got := c.Config.Labels["org.opencontainers.image.version"]; got != version {
			t.Fatalf("%s: label org.opencontainers.image.version %q", archive, got)
		}
		if f := img.file(t, binary); f.mode&0o111 == 0 {
			t.Fatalf("/%s is not executable: %s", binary, f)
		}
		if certs := img.file(t, "etc/ssl/certs/ca-certificates.crt"); bytes.Count(certs.data, []byte("-----BEGIN CERTIFICATE-----")) < 50 {
			t.Fatalf("/etc/ssl/certs/ca-certificates.crt holds %d certificates", bytes.Count(certs.data, []byte("-----BEGIN CERTIFICATE-----")))
		}
		passwd := string(img.file(t, "etc/passwd").data)
		if !regexp.MustCompile(`(?m)^nonroot:x:65532:65532:[^:]*:/home/nonroot:`).MatchString(passwd) {
			t.Fatalf("/etc/passwd has no nonroot user 65532:\n%s", passwd)
		}
		if f := img.file(t, "home/nonroot/"); f.uid != 65532 || f.gid != 65532 {
			t.Fatalf("/home/nonroot: %s, want owned by 65532", f)
		}
		if f := img.file(t, "tmp/"); f.mode&0o1777 != 0o1777 {
			t.Fatalf("/tmp: %s, want 1777", f)
		}
		img.file(t, "usr/share/zoneinfo/")
		if tz := img.file(t, "usr/share/zoneinfo/Europe/Berlin"); !bytes.HasPrefix(tz.data, []byte("TZif")) && tz.link == "" {
			t.Fatalf("/usr/share/zoneinfo/Europe/Berlin is not a zone file: %s", tz)
		}
		images[c.ociPlatform.String()] = img
	}
	return images
}

// TestImageArchive builds the release images and checks them: platforms,
// configuration, base files; the amd64 and arm64 binaries are static ELF
// files for their machine, and the one for this machine runs and prints
// the version it was built with.
func TestImageArchive(t *testing.T) {
	sidecarArchive, workerArchive := sharedImages(t)
	images := checkImageIndex(t, sidecarArchive, sidecartest.SidecarImageRepository, imageTestVersion, "sidecar")
	for port := range map[string]bool{"4040/tcp": true, "8081/tcp": true} {
		if _, ok := images["linux/amd64"].config.Config.ExposedPorts[port]; !ok {
			t.Fatalf("the sidecar image does not expose %s (the Dockerfile does)", port)
		}
	}
	checkStaticELF(t, images["linux/amd64"].file(t, "sidecar").data, elf.EM_X86_64)
	checkStaticELF(t, images["linux/arm64"].file(t, "sidecar").data, elf.EM_AARCH64)

	bin := filepath.Join(t.TempDir(), "sidecar")
	if err := os.WriteFile(bin, images["linux/"+runtime.GOARCH].file(t, "sidecar").data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "sidecar "+imageTestVersion {
		t.Fatalf("the image's linux/%s binary, --version: %v %q, want \"sidecar %s\"", runtime.GOARCH, err, out, imageTestVersion)
	}

	workers := checkImageIndex(t, workerArchive, sidecartest.AppImageRepository, imageTestVersion, "worker")
	checkStaticELF(t, workers["linux/arm64"].file(t, "worker").data, elf.EM_AARCH64)
}

// TestImageReproducible builds the images a second time (the first build
// is the one TestImageArchive checks): the archives, and so the index
// digests, are the same byte for byte.
func TestImageReproducible(t *testing.T) {
	first, firstWorker := sharedImages(t)
	second, secondWorker := buildImages(t)
	for _, pair := range [][2]string{{first, second}, {firstWorker, secondWorker}} {
		a, b := readOCIArchive(t, pair[0]), readOCIArchive(t, pair[1])
		da, db := a.index(t).Manifests[0].Digest, b.index(t).Manifests[0].Digest
		if da != db {
			t.Fatalf("%s: two builds give index digests %s and %s", filepath.Base(pair[0]), da, db)
		}
		if sa, sb := fileSum(t, pair[0]), fileSum(t, pair[1]); sa != sb {
			t.Fatalf("%s: same index digest, but the archives differ", filepath.Base(pair[0]))
		}
		t.Logf("%s: index %s", filepath.Base(pair[0]), da)
	}
}

// TestImageToolRefusesBadFlags: hack/tools/image exits 2 naming the flag.
func TestImageToolRefusesBadFlags(t *testing.T) {
	tool := filepath.Join(t.TempDir(), "image-tool")
	build := exec.Command(sidecartest.GoTool(), "build", "-trimpath", "-o", tool, ".")
	build.Dir = "../../hack/tools/image"
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hack/tools/image: %v\n%s", err, out)
	}
	out := filepath.Join(t.TempDir(), "x.tar")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-image", "a=b"}, "-o is required"},
		{[]string{"-o", out}, "-image is required"},
		{[]string{"-o", out, "-image", "nobinary"}, `-image "nobinary": want REFERENCE=BINARY`},
		{[]string{"-o", out, "-platforms", "linux/amd64,linux/arm64", "-image", "a=bin/sidecar"}, "must hold {arch}"},
		{[]string{"-o", out, "-platforms", "windows/amd64", "-image", "a=b"}, `-platforms "windows/amd64"`},
		{[]string{"-o", out, "-platforms", "linux/amd64,linux/amd64", "-image", "a={arch}"}, "linux/amd64 is given twice"},
		{[]string{"-o", out, "-expose", "70000/tcp", "-image", "a=b"}, `-expose "70000/tcp"`},
		{[]string{"-o", out, "-label", "=x", "-image", "a=b"}, `-label "=x"`},
		{[]string{"-o", out, "-image", "a=b", "extra"}, "unexpected arguments"},
		{[]string{"-no-such-flag"}, "flag provided but not defined: -no-such-flag"},
	} {
		cmd := exec.Command(tool, c.args...)
		msg, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(msg), c.want) {
			t.Errorf("image %q: %v, want exit status 2 and %q in:\n%s", c.args, err, c.want, msg)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("bad flags wrote %s", out)
	}
}

// checkStaticELF fails t unless data is a statically linked ELF executable
// for machine.
func checkStaticELF(t *testing.T, data []byte, machine elf.Machine) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not an ELF file: %v", err)
	}
	defer f.Close()
	if f.Machine != machine || f.Type != elf.ET_EXEC {
		t.Fatalf("ELF %s %s, want an executable for %s", f.Type, f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("the %s binary is dynamically linked (%s)", machine, p.Type)
		}
	}
}

func fileSum(t *testing.T, path string) [sha256.Size]byte {
	t.Helper()
	return sha256.Sum256(sidecartest.MustRead(t, path))
}

// dockerfileBuild returns the go build command of the Dockerfile's build
// stage, with its build arguments filled in for this machine.
func dockerfileBuild(t *testing.T, out string) string {
	t.Helper()
	f, err := os.Open(sidecartest.RepoPath(t, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "RUN ")
		if !ok || !strings.Contains(line, "go build") {
			continue
		}
		return strings.NewReplacer(
			"${TARGETOS}", "linux",
			"${TARGETARCH}", runtime.GOARCH,
			"${VERSION}", "image-test",
			"/out/sidecar", out,
		).Replace(line)
	}
	t.Fatal("the Dockerfile has no RUN line with go build")
	return ""
}

// TestImageBinaryRunsInAnEmptyRootAsNonRoot builds the binary as the
// Dockerfile does and runs it chrooted into a directory holding only the
// binary and /tmp, as uid 65532 (the distroless nonroot user): it needs no
// shared library, no /etc file and no privilege, so the final stage lacks
// nothing it needs.
func TestImageBinaryRunsInAnEmptyRootAsNonRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root to chroot and switch to uid 65532; run the suite as root (CI does)")
	}
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("sh", "-c", dockerfileBuild(t, filepath.Join(root, "sidecar")))
	build.Dir = sidecartest.RepoPath(t)
	build.Env = append(os.Environ(), "PATH="+filepath.Dir(sidecartest.GoTool())+":"+os.Getenv("PATH"))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build.Args, err, out)
	}

	jail := func(args ...string) *exec.Cmd {
		cmd := exec.Command("/sidecar", args...)
		cmd.Dir = "/"
		cmd.Env = []string{}
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Chroot:     root,
			Credential: &syscall.Credential{Uid: 65532, Gid: 65532},
		}
		return cmd
	}
	out, err := jail("--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "sidecar image-test" {
		t.Fatalf("--version in the empty root: %v %q", err, out)
	}

	s := sidecartest.Track(t, jail("--backend", "sqlite", "--sqlite-path", "/tmp/election.db",
		"--http-address", "127.0.0.1:0", "--ops-address", "127.0.0.1:0", "--log-format", "json"))
	s.WaitServing()
	leader, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 10*time.Second)
	if leader != s || token != 1 {
		t.Fatalf("leader %v token %d", leader, token)
	}
	// The exec probe works in the image too (it has no curl).
	if out, err := jail("probe", "--address", s.Addr(), "/leader/ready").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "leader" {
		t.Fatalf("sidecar probe /leader/ready on the leader: %v %q", err, out)
	}
	s.Signal(syscall.SIGTERM)
	if code := s.WaitExit(10 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit status %d", code)
	}
}
