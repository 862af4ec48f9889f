package kubeevents

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/kubetest"
)

// env is a real kube-apiserver and etcd (envtest) for the tests that
// write Events; its Client (client-go's clientset) reads them back.
var env *kubetest.Env

func TestMain(m *testing.M) {
	kubetest.Main(m, func(e *kubetest.Env) error {
		env = e
		return nil
	}, kubetest.IdleClientGoroutines()...)
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
