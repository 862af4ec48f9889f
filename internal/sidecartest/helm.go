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

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// Helm returns the helm binary: $HELM if set, else what hack/helm.sh
// installs. It fails t (never skips): the chart tests are part of the
// suite.
func Helm(t testing.TB) string {
	t.Helper()
	script := RepoPath(t, "hack", "helm.sh")
	helmOnce.Do(func() {
		if p := os.Getenv("HELM"); p != "" {
			helmPath = p
			return
		}
		start := time.Now()
		cmd := exec.Command(script)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("hack/helm.sh: %v\n%s", err, stderr.String())
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		helmPath = lines[len(lines)-1]
		fmt.Fprintf(os.Stderr, "helm: %s (hack/helm.sh took %v)\n", helmPath, time.Since(start).Round(time.Millisecond))
	})
	if helmErr != nil {
		t.Fatalf("no helm: %v", helmErr)
	}
	return helmPath
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
