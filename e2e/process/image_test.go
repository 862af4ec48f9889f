package process

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

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
