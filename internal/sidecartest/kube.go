package sidecartest

import (
	"context"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/leader-sidecar/leader-sidecar/internal/kubetest"
)

// KubeEnv is a real kube-apiserver and etcd (envtest) with an admin
// client.
type KubeEnv struct {
	// Env is the envtest environment: Env.ControlPlane.APIServer stops and
	// starts the API server (clients trust it again after a restart).
	Env    *envtest.Environment
	Config *rest.Config
	Client kubernetes.Interface
	kt     *kubetest.Env
}

var (
	kubeOnce    sync.Once
	kubeShared  *KubeEnv
	kubeStartup error
)

// Kube returns the API server shared by the test binary, started the first
// time a test needs it and stopped by Main. It fails t (never skips) if
// the API server cannot start: the tests that need it are part of the
// suite.
func Kube(t testing.TB) *KubeEnv {
	t.Helper()
	kubeOnce.Do(func() {
		var e *kubetest.Env
		if e, kubeStartup = kubetest.Start(); kubeStartup == nil {
			kubeShared = &KubeEnv{Env: e.Env, Config: e.Config, Client: e.Client, kt: e}
		}
	})
	if kubeStartup != nil {
		t.Fatalf("starting kube-apiserver and etcd: %v", kubeStartup)
	}
	return kubeShared
}

// OwnKube starts an API server and etcd for t alone, stopped when t ends
// (after the cleanups t registers later, such as its sidecars'): for a
// test that stops and starts the API server, which it must not do under
// the tests that share Kube's. It fails t if they cannot start.
func OwnKube(t testing.TB) *KubeEnv {
	t.Helper()
	e, err := kubetest.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stopping kube-apiserver and etcd: %v", err)
		}
	})
	return &KubeEnv{Env: e.Env, Config: e.Config, Client: e.Client, kt: e}
}

func stopKube() {
	if kubeShared != nil {
		_ = kubeShared.kt.Stop()
	}
}

// Kubeconfig writes a kubeconfig for the API server's admin; with a
// non-empty impersonate, every request is made as that user.
func (k *KubeEnv) Kubeconfig(t testing.TB, impersonate string) string {
	t.Helper()
	path, err := k.kt.WriteKubeconfig(t.TempDir(), impersonate)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// KubeconfigVia writes a kubeconfig for the API server's admin whose
// server is addr (a TCPProxy's): the TLS server name stays the API
// server's, so its certificate still verifies.
func (k *KubeEnv) KubeconfigVia(t testing.TB, addr string) string {
	t.Helper()
	u, err := url.Parse(k.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{
		Server:                   "https://" + addr,
		CertificateAuthorityData: k.Config.CAData,
		TLSServerName:            u.Hostname(),
	}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: k.Config.CertData, ClientKeyData: k.Config.KeyData, Token: k.Config.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Namespace creates a namespace of the test's own.
func (k *KubeEnv) Namespace(t testing.TB) string {
	t.Helper()
	ns, err := k.kt.Namespace(context.Background(), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// Lease reads the Lease as the API server has it.
func (k *KubeEnv) Lease(t testing.TB, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := k.Client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Lease %s/%s: %v", ns, name, err)
	}
	return l
}

// LeaseShows fails t unless the Lease in the API server names holder and
// carries token as leaseTransitions.
func (k *KubeEnv) LeaseShows(t testing.TB, ns, name, holder string, token int64) {
	t.Helper()
	spec := k.Lease(t, ns, name).Spec
	if spec.HolderIdentity == nil || *spec.HolderIdentity != holder ||
		spec.LeaseTransitions == nil || int64(*spec.LeaseTransitions) != token {
		t.Fatalf("Lease spec holder=%v transitions=%v, want %q and %d",
			Deref(spec.HolderIdentity), Deref(spec.LeaseTransitions), holder, token)
	}
}

// CreatePod creates a Pod object (no kubelet runs it) for a sidecar to
// publish on, and returns its UID.
func (k *KubeEnv) CreatePod(t testing.TB, ns, name string) string {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	pod, err := k.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(pod.UID)
}

// MarkedPods lists the Pods of ns that show leadership in the readiness
// mode (pod-condition or label), or that carry the leader's deletion cost
// (mode "deletion-cost").
func (k *KubeEnv) MarkedPods(t testing.TB, ns, mode string) []string {
	t.Helper()
	pods, err := k.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var marked []string
	for _, p := range pods.Items {
		if mode == "label" && p.Labels["leader-sidecar.io/role"] == "leader" {
			marked = append(marked, p.Name)
		}
		if mode == "deletion-cost" && p.Annotations["controller.kubernetes.io/pod-deletion-cost"] == "2147483647" {
			marked = append(marked, p.Name)
		}
		for _, c := range p.Status.Conditions {
			if mode == "pod-condition" && c.Type == "leader-sidecar.io/leader" && c.Status == corev1.ConditionTrue {
				marked = append(marked, p.Name)
			}
		}
	}
	return marked
}

// AwaitMarked waits until exactly the Pod want is marked, failing if two
// Pods are ever marked at once.
func (k *KubeEnv) AwaitMarked(t testing.TB, ns, mode, want string) {
	t.Helper()
	deadline := time.Now().Add(3 * LeaseDuration)
	for {
		marked := k.MarkedPods(t, ns, mode)
		if len(marked) > 1 {
			t.Fatalf("%s: Pods %v all show leadership", mode, marked)
		}
		if len(marked) == 1 && marked[0] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: marked Pods %v, want only %s", mode, marked, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Deref is *p, or "<nil>", for messages.
func Deref[T any](p *T) any {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// LeaseSidecar starts a sidecar on the Lease ns/name through kubeconfig,
// as the Pod pod (for Events), and waits until it serves.
func LeaseSidecar(t testing.TB, kubeconfig, ns, name, pod string, extra ...string) *Sidecar {
	t.Helper()
	s := Spawn(t, []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + ns},
		append([]string{"--backend", "lease", "--kubeconfig", kubeconfig, "--namespace", ns, "--lease-name", name}, extra...)...)
	s.WaitServing()
	return s
}
