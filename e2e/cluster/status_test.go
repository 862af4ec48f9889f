//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKubectlLeaderStatus runs the real kubectl with the sidecar binary on
// its PATH as kubectl-leader, as docs/operations.md says to install it:
// kubectl leader status shows the example chart's election with the
// leader's identity and token.
func TestKubectlLeaderStatus(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	pods := installExample(t, ctx, ns, 2)

	bin := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(bin, "kubectl-leader"), "./cmd/sidecar")
	build.Dir = cl.root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	kubectlLeader := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, cl.kubectl, append([]string{"leader"}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cl.kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return string(out), err
	}
	eventually(t, ctx, "kubectl leader status shows the leader", func() (bool, string) {
		st, _, reason := oneLeader(ctx, ns, pods)
		if reason != "" {
			return false, reason
		}
		began := time.Now()
		out, err := kubectlLeader("status", "-n", ns)
		if err != nil {
			return false, err.Error()
		}
		took := time.Since(began)
		want := strings.Join([]string{fullName, st.Identity, fmt.Sprint(*st.Token)}, " ")
		row := strings.Join(strings.Fields(out), " ")
		if !strings.HasPrefix(row, "NAME HOLDER TOKEN TERM RENEWED LEASE HANDOFF STATE "+want+" ") || !strings.HasSuffix(row, " 15s - held") {
			return false, fmt.Sprintf("kubectl leader status -n %s:\n%s\nwant a row starting %q", ns, out, want)
		}
		t.Logf("kubectl leader status (%v):\n%s", took.Round(time.Millisecond), out)
		return true, ""
	})
}
