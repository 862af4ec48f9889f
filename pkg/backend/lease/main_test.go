package lease

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/leader-sidecar/leader-sidecar/internal/kubetest"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// The package's tests share one API server (kube-apiserver and etcd run by
// envtest), started once by TestMain. Each test works in namespaces of its
// own.
var (
	testEnv *envtest.Environment
	testCfg *rest.Config
	admin   kubernetes.Interface
)

// guardChildren, where the platform supports it, arranges for envtest's
// processes to die with the test binary even if it crashes (a panic or a
// -timeout skips TestMain's cleanup), and returns the directory of binaries
// to start instead of assetsDir. runChildShim is its other half: it only
// returns in a process that is not such a child.
var (
	guardChildren func(assetsDir string) (string, error)
	runChildShim  = func() {}
)

func TestMain(m *testing.M) {
	runChildShim()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	flag.Parse()
	crlog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())

	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if err := checkAssets(assets); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\nBuild the API server binaries and point KUBEBUILDER_ASSETS at them:\n"+
			"\texport KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh | tail -1)\nor run the tests with `make test`.\n", err)
		return 1
	}
	certDir, err := os.MkdirTemp("", "lease-envtest-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	defer os.RemoveAll(certDir)
	binDir := assets
	if guardChildren != nil {
		if binDir, err = guardChildren(assets); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			return 1
		}
		defer os.RemoveAll(binDir)
	}

	// A fixed CertDir keeps the serving certificate across an API server
	// restart (TestWatchSurvivesAPIServerRestart), and a watch termination
	// grace period lets it stop in a second despite open watches (without
	// one, it waits for them until envtest gives up and kills it). The
	// feature gate lets Leases keep spec.strategy and preferredHolder.
	apiServer := &envtest.APIServer{CertDir: certDir, Path: filepath.Join(binDir, "kube-apiserver")}
	apiServer.Configure().Append("feature-gates", "CoordinatedLeaderElection=true")
	apiServer.Configure().Set("shutdown-watch-termination-grace-period", "2s")
	testEnv = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		ControlPlane: envtest.ControlPlane{
			APIServer: apiServer,
			Etcd:      &envtest.Etcd{Path: filepath.Join(binDir, "etcd")},
		},
	}
	started := time.Now()
	testCfg, err = testEnv.Start()
	if err != nil {
		_ = testEnv.Stop()
		fmt.Fprintf(os.Stderr, "FAIL: starting envtest from %s: %v\n", assets, err)
		return 1
	}
	if testing.Verbose() {
		fmt.Printf("envtest started in %v\n", time.Since(started).Round(time.Millisecond))
	}
	admin = kubernetes.NewForConfigOrDie(testCfg)

	code := m.Run()

	if err := testEnv.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: stopping envtest: %v\n", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(kubetest.IdleClientGoroutines()...); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	return code
}

// checkAssets reports whether dir holds the binaries envtest runs.
func checkAssets(dir string) error {
	if dir == "" {
		return fmt.Errorf("KUBEBUILDER_ASSETS is not set")
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return fmt.Errorf("KUBEBUILDER_ASSETS=%s: %w", dir, err)
		}
	}
	return nil
}

// ctxFor returns a context that ends with the test or after 30 seconds.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns, err := admin.CoreV1().Namespaces().Create(ctxFor(t),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lease-test-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}

// newClient returns a client made by kubeclient.NewClient for the test API server,
// fast enough not to throttle racing tests.
func newClient(t *testing.T) *kubeclient.Client {
	t.Helper()
	c, err := kubeclient.NewClient(testCfg, kubeclient.Options{Timeout: 10 * time.Second, QPS: 1000, Burst: 2000, UserAgent: "lease-test"})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// newBackend opens a Backend and closes it when the test ends.
func newBackend(t *testing.T, c *kubeclient.Client, ns, name string) *Backend {
	t.Helper()
	b, err := New(Options{Client: c, Namespace: ns, Name: name})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
