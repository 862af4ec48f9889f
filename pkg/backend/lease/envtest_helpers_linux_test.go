//go:build linux

package lease

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// On Linux, envtest starts kube-apiserver and etcd through this test binary
// itself: each is a symbolic link to it, named after the real binary. Run
// that way, the binary asks the kernel to kill it when its parent (the
// test process) dies, then replaces itself with the real binary, which
// keeps that request. A test binary that crashes thus leaves no API server
// or etcd behind.

// shimEnv carries "<parent pid>:<assets dir>" to the children.
const shimEnv = "LEASE_TEST_ENVTEST_SHIM"

func init() {
	guardChildren = makeShimDir
	runChildShim = execUnderParentDeath
}

// makeShimDir creates a directory of links to this binary named like the
// binaries in assetsDir, and marks the environment for the children.
func makeShimDir(assetsDir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locating the test binary: %w", err)
	}
	dir, err := os.MkdirTemp("", "lease-envtest-bin-")
	if err != nil {
		return "", err
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if err := os.Symlink(self, filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("linking %s: %w", name, err)
		}
	}
	// The links are only read when a child starts; the directory can go
	// once the test binary exits, and a leftover one is harmless.
	if err := os.Setenv(shimEnv, strconv.Itoa(os.Getpid())+":"+assetsDir); err != nil {
		return "", err
	}
	return dir, nil
}

// execUnderParentDeath returns at once in the test process. In a child
// started through a link it never returns: it sets its parent-death signal
// and execs the real binary of the same name.
func execUnderParentDeath() {
	spec, ok := os.LookupEnv(shimEnv)
	name := filepath.Base(os.Args[0])
	if !ok || (name != "kube-apiserver" && name != "etcd") {
		return
	}
	parent, assets, found := strings.Cut(spec, ":")
	if !found {
		fmt.Fprintf(os.Stderr, "%s: malformed %s=%q\n", name, shimEnv, spec)
		os.Exit(2)
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "%s: prctl(PR_SET_PDEATHSIG): %v\n", name, errno)
		os.Exit(2)
	}
	if strconv.Itoa(os.Getppid()) != parent {
		os.Exit(2) // the test process is already gone
	}
	real := filepath.Join(assets, name)
	err := syscall.Exec(real, append([]string{real}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "%s: exec %s: %v\n", name, real, err)
	os.Exit(2)
}
