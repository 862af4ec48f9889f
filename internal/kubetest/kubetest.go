// Package kubetest starts a real kube-apiserver and etcd for tests, with
// controller-runtime's envtest, from the binaries hack/envtest-binaries.sh
// builds (KUBEBUILDER_ASSETS). A missing binary is an error, so tests that
// need the API server fail rather than skip.
package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
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

// Hint tells how to get the binaries.
const Hint = "build them with `hack/envtest-binaries.sh` and export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh | tail -1), or run `make test`"

// Env is a running API server with an admin client.
type Env struct {
	Env    *envtest.Environment
	Config *rest.Config
	Client kubernetes.Interface
	dir    string
}

// quietLogs silences controller-runtime's and klog's global loggers, once:
// a second Start, while clients log, must not write them again.
var quietLogs sync.Once

// Start starts kube-apiserver and etcd. The serving certificate lives in a
// fixed directory, so clients trust the API server again after
// Env.ControlPlane.APIServer.Stop() and Start().
func Start() (*Env, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); assets == "" || err != nil {
			return nil, fmt.Errorf("KUBEBUILDER_ASSETS=%q has no %s: %s", assets, bin, Hint)
		}
	}
	quietLogs.Do(func() {
		crlog.SetLogger(logr.Discard())
		klog.SetLogger(logr.Discard())
	})
	dir, err := os.MkdirTemp("", "kubetest")
	if err != nil {
		return nil, err
	}
	certs := filepath.Join(dir, "certs")
	if err := os.Mkdir(certs, 0o700); err != nil {
		return nil, err
	}
	// Start timeouts for a loaded machine: envtest's 20s for etcd was seen
	// to run out (every try) beside a full make test and other work.
	apiServer := &envtest.APIServer{CertDir: certs, StartTimeout: 2 * time.Minute}
	// An open watch would hold a stopping API server for its default 20s.
	apiServer.Configure().Set("shutdown-watch-termination-grace-period", "2s")
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		ControlPlane: envtest.ControlPlane{
			APIServer: apiServer,
			// In dir, so that its process can be told from others (PIDs).
			Etcd: &envtest.Etcd{DataDir: filepath.Join(dir, "etcd"), StartTimeout: time.Minute},
		},
	}
	cfg, err := env.Start()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &Env{Env: env, Config: cfg, Client: client, dir: dir}, nil
}

// Stop stops the API server and etcd and removes their files.
func (e *Env) Stop() error {
	err := e.Env.Stop()
	_ = os.RemoveAll(e.dir)
	return err
}

// WriteKubeconfig writes a kubeconfig for the admin user into dir; with a
// non-empty impersonate, every request is made as that user.
func (e *Env) WriteKubeconfig(dir, impersonate string) (string, error) {
	c := clientcmdapi.NewConfig()
	c.Clusters["envtest"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData}
	c.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: e.Config.CertData,
		ClientKeyData:         e.Config.KeyData,
		Token:                 e.Config.BearerToken,
		Impersonate:           impersonate,
	}
	c.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	c.CurrentContext = "envtest"
	path := filepath.Join(dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*c, path)
}

var namespaces atomic.Int64

// Namespace creates a namespace named after base (a test name), unique in
// this process.
func (e *Env) Namespace(ctx context.Context, base string) (string, error) {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", " ", "-").Replace(base))
	if len(name) > 40 {
		name = name[:40]
	}
	name = fmt.Sprintf("%s-%d-%d", strings.Trim(name, "-"), time.Now().Unix()%10000, namespaces.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := e.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	return name, err
}
