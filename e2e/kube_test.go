package e2e

import (
	"context"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/leader-sidecar/leader-sidecar/internal/kubetest"
)

// kubeEnv is a real kube-apiserver and etcd, started the first time a test
// needs them and stopped by TestMain.
type kubeEnv struct {
	*kubetest.Env
	env    *envtest.Environment
	client kubernetes.Interface
}

var (
	kubeOnce    sync.Once
	kubeShared  *kubeEnv
	kubeStartup error
)

// kube returns the shared API server, failing t (never skipping) if it
// cannot start: the lease tests are part of the suite.
func kube(t *testing.T) *kubeEnv {
	t.Helper()
	kubeOnce.Do(func() {
		var e *kubetest.Env
		if e, kubeStartup = kubetest.Start(); kubeStartup == nil {
			kubeShared = &kubeEnv{Env: e, env: e.Env, client: e.Client}
		}
	})
	if kubeStartup != nil {
		t.Fatalf("starting kube-apiserver and etcd: %v", kubeStartup)
	}
	return kubeShared
}

func stopKube() {
	if kubeShared != nil {
		_ = kubeShared.Stop()
	}
}

// kubeconfig writes a kubeconfig for the API server's admin; with a
// non-empty impersonate, every request is made as that user.
func (k *kubeEnv) kubeconfig(t *testing.T, impersonate string) string {
	t.Helper()
	path, err := k.WriteKubeconfig(t.TempDir(), impersonate)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// namespace creates a namespace of the test's own.
func (k *kubeEnv) namespace(t *testing.T) string {
	t.Helper()
	ns, err := k.Namespace(context.Background(), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// lease reads the Lease as the API server has it.
func (k *kubeEnv) lease(t *testing.T, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := k.client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Lease %s/%s: %v", ns, name, err)
	}
	return l
}

// leaseSidecar starts a sidecar on the Lease ns/name through kubeconfig,
// as the Pod pod (for Events).
func leaseSidecar(t *testing.T, kubeconfig, ns, name, pod string, extra ...string) *sidecar {
	t.Helper()
	s := spawn(t, []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + ns},
		append([]string{"--backend", "lease", "--kubeconfig", kubeconfig, "--namespace", ns, "--lease-name", name}, extra...)...)
	s.waitServing()
	return s
}
