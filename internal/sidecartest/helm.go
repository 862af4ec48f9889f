package sidecartest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// helmInstall is one Helm binary, looked up once per test binary.
type helmInstall struct {
	name string   // for messages: "helm", "Helm 4"
	env  string   // the variable that names a binary to use instead
	args []string // hack/helm.sh's arguments
	once sync.Once
	path string
	err  error
}

var (
	helm3 = helmInstall{name: "helm", env: "HELM"}
	helm4 = helmInstall{name: "Helm 4", env: "HELM4", args: []string{"4"}}
)

// Helm returns the helm binary (Helm 3): $HELM if set, else what
// hack/helm.sh installs. It fails t (never skips): the chart tests are
// part of the suite.
func Helm(t testing.TB) string { return helm3.binary(t) }

// Helm4 returns the Helm 4 binary: $HELM4 if set, else what
// `hack/helm.sh 4` installs. It fails t (never skips).
func Helm4(t testing.TB) string { return helm4.binary(t) }

func (h *helmInstall) binary(t testing.TB) string {
	t.Helper()
	script := RepoPath(t, "hack", "helm.sh")
	h.once.Do(func() {
		if p := os.Getenv(h.env); p != "" {
			h.path = p
			return
		}
		command := strings.Join(append([]string{"hack/helm.sh"}, h.args...), " ")
		start := time.Now()
		cmd := exec.Command(script, h.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			h.err = fmt.Errorf("%s: %v\n%s", command, err, stderr.String())
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		h.path = lines[len(lines)-1]
		fmt.Fprintf(os.Stderr, "%s: %s (%s took %v)\n", h.name, h.path, command, time.Since(start).Round(time.Millisecond))
	})
	if h.err != nil {
		t.Fatalf("no %s: %v", h.name, h.err)
	}
	return h.path
}

// RunHelm runs helm with args and returns stdout, or stderr as the error.
func RunHelm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(Helm(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(os.TempDir(), "leader-sidecar-helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(os.TempDir(), "leader-sidecar-helm-config"),
		"HELM_DATA_HOME="+filepath.Join(os.TempDir(), "leader-sidecar-helm-data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// Charts copies charts/ into a temporary directory and builds the example
// chart's dependency on the library there, so the repository is left as it
// is and the library is always the current one. It returns that directory.
func Charts(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "charts")
	if err := os.CopyFS(dir, os.DirFS(RepoPath(t, "charts"))); err != nil {
		t.Fatal(err)
	}
	if _, err := RunHelm(t, "dependency", "build", filepath.Join(dir, "leader-sidecar-example")); err != nil {
		t.Fatal(err)
	}
	return dir
}
