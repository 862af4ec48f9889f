package sidecartest

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// sidecarPkg is the sidecar's command, relative to the repository.
const sidecarPkg = "cmd/sidecar"

// binDir is where Main builds binaries; it removes it when the tests end.
var binDir string

// build is one command built at most once per test binary.
type build struct {
	once sync.Once
	path string
	err  error
}

var (
	buildsMu sync.Mutex
	builds   = map[string]*build{}
)

// Main builds the sidecar, runs the tests of m, stops the API server if a
// test started one ([Kube]) and removes what it built. It returns the exit
// code for os.Exit:
//
//	func TestMain(m *testing.M) { os.Exit(sidecartest.Main(m)) }
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "leader-sidecar-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	if _, err := buildOnce(sidecarPkg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	stopKube()
	return code
}

// KubeMain runs the tests of m and stops the API server if a test started
// one ([Kube]), building nothing: for packages that only send objects to
// the API server. It returns the exit code for os.Exit.
func KubeMain(m *testing.M) int {
	code := m.Run()
	stopKube()
	return code
}

// Binary is the sidecar binary Main built.
func Binary(t testing.TB) string {
	t.Helper()
	return Build(t, sidecarPkg)
}

// Build builds the command in the repository directory pkg (such as
// "examples/worker") with CGO_ENABLED=0, once per test binary, and returns
// its path. It fails t if the build fails, or if Main did not run.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	path, err := buildOnce(pkg)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// HookedBinary is the sidecar built with -tags e2ehooks, once per test
// binary: the test hooks of cmd/sidecar/testhooks.go and
// pkg/supervise/testhooks.go, which the environment turns on
// (SIDECAR_E2E_STOP_AFTER_ACCEPT=1: the sidecar stops itself with SIGSTOP
// right after it accepted a hand-off; SIDECAR_E2E_GUARDIAN_PAUSE: the
// lock's guardian pauses as it starts).
func HookedBinary(t testing.TB) string {
	t.Helper()
	path, err := buildOnce(sidecarPkg, "e2ehooks")
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func buildOnce(pkg string, tags ...string) (string, error) {
	key := strings.Join(append([]string{pkg}, tags...), " ")
	buildsMu.Lock()
	b := builds[key]
	if b == nil {
		b = &build{}
		builds[key] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() { b.path, b.err = goBuild(pkg, tags...) })
	return b.path, b.err
}

func goBuild(pkg string, tags ...string) (string, error) {
	if binDir == "" {
		return "", errors.New("sidecartest: nowhere to build " + pkg + ": call sidecartest.Main from TestMain")
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(binDir, strings.Join(append([]string{filepath.Base(pkg)}, tags...), "-"))
	cmd := exec.Command(GoTool(), "build", "-trimpath", "-tags="+strings.Join(tags, ","), "-o", bin, "./"+pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// GoTool is the go command: the one on PATH, else the one of the Go
// installation that built the test.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// WaitBoundParallel sets how many tests of the binary run at once, n,
// unless -parallel was given. For packages whose tests spend their time
// waiting on lease timings and Pods rather than computing, where the
// default (GOMAXPROCS) would leave the machine idle. Call it from TestMain
// before Main or m.Run.
func WaitBoundParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(err) // the testing package defines it
		}
	}
}
