package kubeclient

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/kubetest"
)

// env is a real kube-apiserver and etcd (envtest) shared by the tests;
// its Client, client-go's clientset, checks what this package's client did.
var env *kubetest.Env

func TestMain(m *testing.M) {
	kubetest.Main(m, func(e *kubetest.Env) error {
		env = e
		return nil
	}, kubetest.IdleClientGoroutines()...)
}

// ctxFor ends with the test or after 30 seconds.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newClient is a Client of the test API server.
func newClient(t *testing.T) *Client {
	t.Helper()
	c, err := New(env.Config)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns, err := env.Client.CoreV1().Namespaces().Create(ctxFor(t),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kubeclient-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}

// kubeconfigFor writes a kubeconfig whose one context points at server.
func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
