package kubeevents

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/leader-sidecar/leader-sidecar/internal/kubetest"
)

// env is a real kube-apiserver and etcd (envtest) for the tests that
// write Events; its Client (client-go's clientset) reads them back.
var env *kubetest.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = kubetest.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: starting kube-apiserver and etcd: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
	}
	if code == 0 {
		if err := goleak.Find(leakOptions()...); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// leakOptions ignores goroutines that outlive a Recorder by design: klog's
// flush daemon and idle keep-alive connections.
func leakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
	}
}

// logBuffer is a logger whose output a test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }
