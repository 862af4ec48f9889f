//go:build cluster

package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// env is what the tests use of the cluster: its kubeconfig, a client, and
// the kubectl and helm binaries the repository builds.
type env struct {
	root, kubeconfig, kubectl, helm string
	client                          kubernetes.Interface
}

var cl *env

func TestMain(m *testing.M) {
	e, err := setup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/cluster:", err)
		os.Exit(1)
	}
	cl = e
	os.Exit(m.Run())
}

func setup() (*env, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	e := &env{root: root, kubeconfig: os.Getenv("LEADER_SIDECAR_KUBECONFIG")}
	if e.kubeconfig == "" {
		if e.kubeconfig, err = lastLine(root, "hack/cluster.sh", "up"); err != nil {
			return nil, err
		}
	}
	bin, err := lastLine(root, "hack/cluster-binaries.sh")
	if err != nil {
		return nil, err
	}
	e.kubectl = filepath.Join(bin, "kubectl")
	if e.helm, err = lastLine(root, "hack/helm.sh"); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		return nil, err
	}
	if e.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return e, nil
}

// lastLine runs a script of the repository and returns the last line of
// its stdout; its stderr goes to the test's.
func lastLine(root, script string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, script), args...)
	cmd.Dir, cmd.Stderr = root, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", script, strings.Join(args, " "), err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// run runs kubectl or helm against the cluster and returns its stdout; it
// fails the test when the command fails.
func (e *env) run(t testing.TB, ctx context.Context, name string, args ...string) string {
	t.Helper()
	out, err := e.try(ctx, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), err)
	}
	return out
}

// try is run without failing: the error carries the command's stderr.
func (e *env) try(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = e.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// namespace creates a namespace of its own for the test, enforcing Pod
// Security "restricted" as the charts promise to meet, and deletes it
// afterwards.
func (e *env) namespace(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "e2e-" + hex.EncodeToString(b)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = e.try(ctx, e.helm, "uninstall", "--namespace", name, "--no-hooks", "--wait", "--timeout", "20s", "demo")
		_ = e.client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

// eventually polls cond every 250ms until it holds or ctx ends, then fails
// the test with the last reason cond gave.
func eventually(t testing.TB, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	var reason string
	for {
		var ok bool
		if ok, reason = cond(); ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %s", what, reason)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
