package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
)

// kubeEnv is a real kube-apiserver and etcd, started by envtest the first
// time a test needs them and stopped by TestMain.
type kubeEnv struct {
	env    *envtest.Environment
	cfg    *rest.Config
	client kubernetes.Interface
	dir    string // kubeconfig files and the API server's certificates
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
	kubeOnce.Do(func() { kubeShared, kubeStartup = startKube() })
	if kubeStartup != nil {
		t.Fatalf("starting kube-apiserver and etcd: %v\nbuild them with `hack/envtest-binaries.sh` and export KUBEBUILDER_ASSETS, or run `make test`", kubeStartup)
	}
	return kubeShared
}

func startKube() (*kubeEnv, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); assets == "" || err != nil {
			return nil, fmt.Errorf("KUBEBUILDER_ASSETS=%q has no %s", assets, bin)
		}
	}
	crlog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "leader-sidecar-kube")
	if err != nil {
		return nil, err
	}
	// A fixed certificate directory keeps the serving certificate, so
	// clients trust the API server again after a restart.
	certs := filepath.Join(dir, "certs")
	if err := os.Mkdir(certs, 0o700); err != nil {
		return nil, err
	}
	// A watch termination grace period lets a restarting API server stop in
	// about two seconds despite the sidecars' open watches (without one it
	// waits for them until envtest gives up and kills it, about 20s later).
	apiServer := &envtest.APIServer{CertDir: certs}
	apiServer.Configure().Set("shutdown-watch-termination-grace-period", "2s")
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		ControlPlane:          envtest.ControlPlane{APIServer: apiServer},
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &kubeEnv{env: env, cfg: cfg, client: client, dir: dir}, nil
}

func stopKube() {
	if kubeShared != nil {
		_ = kubeShared.env.Stop()
		_ = os.RemoveAll(kubeShared.dir)
	}
}

// kubeconfig writes a kubeconfig for the API server's admin; with a
// non-empty impersonate, every request is made as that user.
func (k *kubeEnv) kubeconfig(t *testing.T, impersonate string) string {
	t.Helper()
	c := clientcmdapi.NewConfig()
	c.Clusters["envtest"] = &clientcmdapi.Cluster{Server: k.cfg.Host, CertificateAuthorityData: k.cfg.CAData}
	c.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: k.cfg.CertData,
		ClientKeyData:         k.cfg.KeyData,
		Token:                 k.cfg.BearerToken,
		Impersonate:           impersonate,
	}
	c.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	c.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*c, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// namespace creates a namespace of the test's own.
func (k *kubeEnv) namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := k.client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
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
