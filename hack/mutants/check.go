package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A check is how a mutant is meant to be caught, one of:
//
//	sim <hack/sim flags>          the simulator, stopped at the first broken
//	                              schedule (-first-violation); caught if one is
//	test <package> <go test flags> go test on one package, stopped at the
//	                              first failing test (-failfast); caught if one
//	                              fails. -count=N (after the runner's
//	                              -count=1) runs a test that catches a
//	                              mutant only at times N times over
//
// A test package is a path from the repository's root (./pkg/shard); one
// in a module of its own (./pkg/fence) is tested from that module's root.
// Flags are split on white space, so a -run pattern has none.
type check struct {
	kind string // "sim" or "test"
	pkg  string // test: the package
	args []string
}

func parseCheck(s string) (check, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return check{}, errors.New("empty")
	}
	switch f[0] {
	case "sim":
		for _, a := range f[1:] {
			if a == "-first-violation" || a == "-v" {
				return check{}, fmt.Errorf("%s: the runner sets -first-violation, and -v would print every trace", a)
			}
		}
		return check{kind: "sim", args: f[1:]}, nil
	case "test":
		if len(f) < 2 || !strings.HasPrefix(f[1], "./") || strings.HasSuffix(f[1], "...") {
			return check{}, errors.New("test wants one package from the repository's root (./pkg/x), then go test flags")
		}
		if !hasFlag(f[2:], "-run") {
			return check{}, errors.New("a test check names its tests with -run, to stay cheap")
		}
		return check{kind: "test", pkg: f[1], args: f[2:]}, nil
	}
	return check{}, fmt.Errorf("%q: want sim or test", f[0])
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// outcome is what one run of a check found.
type outcome struct {
	// failed: the check failed (caught, on a mutant).
	failed bool
	// ran is how many schedules or tests ran: up to and including the
	// first broken one when failed.
	ran int
	// seed is the first broken schedule's seed (sim); test the first
	// failing test (test).
	seed int64
	test string
	// broken says why a check's run is no answer (a build that failed, no
	// test run, an output it cannot read): an error, not a catch.
	broken string
	took   time.Duration
	output []byte
}

// runner runs checks in a copy of the repository.
type runner struct {
	dir     string   // the copy
	env     []string // the environment of every check
	timeout time.Duration
}

func (r runner) run(ctx context.Context, c check) outcome {
	switch c.kind {
	case "sim":
		return r.sim(ctx, c)
	default:
		return r.test(ctx, c)
	}
}

func (r runner) sim(ctx context.Context, c check) outcome {
	args := append([]string{"run", "-trimpath", "./hack/sim", "-first-violation"}, c.args...)
	code, out, took := r.command(ctx, r.dir, true, args...)
	o := readSim(code, out)
	o.took = took
	return o
}

var (
	firstViolation = regexp.MustCompile(`(?m)^first violation: seed (-?\d+), after (\d+) schedules`)
	schedulesRun   = regexp.MustCompile(`(?m)^(\d+) schedules, (\d+) violations$`)
)

// readSim reads hack/sim -first-violation's answer.
func readSim(code int, out []byte) outcome {
	o := outcome{output: out}
	if m := firstViolation.FindSubmatch(out); m != nil && code == 1 {
		o.failed = true
		o.seed, _ = strconv.ParseInt(string(m[1]), 10, 64)
		o.ran, _ = strconv.Atoi(string(m[2]))
		return o
	}
	if m := schedulesRun.FindSubmatch(out); m != nil && code == 0 {
		o.ran, _ = strconv.Atoi(string(m[1]))
		return o
	}
	o.broken = fmt.Sprintf("hack/sim exited %d without its last line", code)
	return o
}

func (r runner) test(ctx context.Context, c check) outcome {
	root, rel, err := moduleOf(r.dir, c.pkg)
	if err != nil {
		return outcome{broken: err.Error()}
	}
	args := []string{"test", "-json", "-count=1", "-failfast", "-trimpath"}
	if !hasFlag(c.args, "-timeout") {
		args = append(args, "-timeout", r.timeout.String())
	}
	args = append(append(args, c.args...), rel)
	// The race detector needs cgo; everything else builds as make vet
	// does, from the same build cache.
	code, out, took := r.command(ctx, root, !hasFlag(c.args, "-race"), args...)
	o := readTest(code, out)
	o.took = took
	return o
}

// dirs returns the directories of the packages check c builds: hack/sim
// and what it imports, or the test package and what it and its tests
// import, and, for tests that start the sidecar binary (through
// internal/sidecartest, which builds ./cmd/sidecar), what the binary
// imports. A mutant in any other directory cannot be caught by c.
func (r runner) dirs(ctx context.Context, c check) (map[string]bool, error) {
	root, rel := r.dir, "./hack/sim"
	test := c.kind == "test"
	if test {
		var err error
		if root, rel, err = moduleOf(r.dir, c.pkg); err != nil {
			return nil, err
		}
	}
	dirs, err := r.deps(ctx, root, rel, test)
	if err != nil || !dirs[filepath.Join(r.dir, "internal", "sidecartest")] {
		return dirs, err
	}
	binary, err := r.deps(ctx, r.dir, "./cmd/sidecar", false)
	for d := range binary {
		dirs[d] = true
	}
	return dirs, err
}

func (r runner) deps(ctx context.Context, root, rel string, test bool) (map[string]bool, error) {
	args := []string{"list", "-deps", "-f", "{{.Dir}}"}
	if test {
		args = append(args, "-test")
	}
	args = append(args, rel)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = root, r.env
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s in %s: %w", strings.Join(args, " "), root, err)
	}
	dirs := map[string]bool{}
	for _, d := range strings.Fields(string(out)) {
		dirs[d] = true
	}
	return dirs, nil
}

// moduleOf returns the root of the module that holds pkg (a directory of
// the copy dir, "./x/y") and pkg's path from it.
func moduleOf(dir, pkg string) (root, rel string, err error) {
	abs := filepath.Join(dir, filepath.FromSlash(pkg))
	if _, err := os.Stat(abs); err != nil {
		return "", "", fmt.Errorf("package %s: %w", pkg, err)
	}
	for root = abs; ; root = filepath.Dir(root) {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		if root == dir || root == filepath.Dir(root) {
			return "", "", fmt.Errorf("package %s: no go.mod above it", pkg)
		}
	}
	rel, err = filepath.Rel(root, abs)
	if err != nil {
		return "", "", err
	}
	return root, "./" + filepath.ToSlash(rel), nil
}

// testEvent is the part of go test -json's events the runner reads.
type testEvent struct {
	Action string
	Test   string
	Output string
}

// readTest reads go test -json's events: how many tests (and subtests)
// started up to the first that failed, or in all; a test run again by
// -count counts again. A test binary that died while a test ran (a
// runtime fatal error such as concurrent map writes, a panic, the
// -timeout) reports no failure of that test: the test that was running is
// the one that caught the mutant.
func readTest(code int, out []byte) outcome {
	o := outcome{output: out}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	started := 0 // runs of tests, a test run again (-count) counted again
	running := map[string]bool{}
	var buildErrors []string
	var died, lastStarted string
	for sc.Scan() {
		var e testEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if e.Action == "build-output" && !strings.HasPrefix(e.Output, "#") {
			buildErrors = append(buildErrors, strings.TrimSpace(e.Output))
		}
		if e.Action == "output" && died == "" && (strings.HasPrefix(e.Output, "fatal error: ") || strings.HasPrefix(e.Output, "panic: ")) {
			died = strings.TrimSpace(e.Output)
		}
		if e.Test == "" {
			continue
		}
		switch e.Action {
		case "run":
			started++
			running[e.Test], lastStarted = true, e.Test
		case "pass", "skip":
			delete(running, e.Test)
		case "fail":
			delete(running, e.Test)
			if o.test == "" {
				o.test, o.ran = e.Test, started
			}
		}
	}
	switch {
	case o.test != "" && code != 0:
		o.failed = true
	case code != 0 && died != "" && len(running) > 0:
		// The innermost test still running, the last one started if it is.
		t := lastStarted
		if !running[t] {
			for name := range running {
				t = max(t, name)
			}
		}
		o.failed, o.test, o.ran = true, t+" (the test binary died: "+died+")", started
	case code == 0 && started > 0:
		o.ran = started
	case code == 0:
		o.broken = "no test matched"
	case len(buildErrors) > 0:
		o.broken = "it does not compile: " + strings.Join(buildErrors, "; ")
	default:
		o.broken = fmt.Sprintf("go test exited %d and no test failed (a build failure?)", code)
	}
	return o
}

// command runs go with args in dir and returns its exit status (-1 if it
// could not start or was stopped by the timeout), what it printed, and
// its wall time. With static, cgo is off (CGO_ENABLED=0), as make vet and
// make sim build; without, on (the race detector needs it).
func (r runner) command(ctx context.Context, dir string, static bool, args ...string) (int, []byte, time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append([]string{}, r.env...)
	if static {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	} else {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=1") // the last one counts
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// A group of its own, so that a timeout stops the test binaries and
	// what they started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	began := time.Now()
	err := cmd.Run()
	took := time.Since(began)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.Bytes(), took
	case errors.As(err, &exit) && ctx.Err() == nil:
		return exit.ExitCode(), out.Bytes(), took
	}
	fmt.Fprintf(&out, "\nhack/mutants: go %s: %v\n", strings.Join(args, " "), err)
	return -1, out.Bytes(), took
}
