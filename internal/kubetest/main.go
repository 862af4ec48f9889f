package kubetest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a test binary's tests against an API server started for them,
// and exits with their status. setup receives the server before the tests
// run (to keep it, or to build clients of it). The server stops after the
// tests, and then a run whose tests passed fails if a goroutine that was
// not there at the start is still running, other than those ignore names
// (see IdleClientGoroutines).
func Main(m *testing.M, setup func(*Env) error, ignore ...goleak.Option) {
	os.Exit(run(m, setup, ignore))
}

func run(m *testing.M, setup func(*Env) error, ignore []goleak.Option) int {
	before := goleak.IgnoreCurrent()
	env, err := Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: starting kube-apiserver and etcd: %v\n", err)
		return 1
	}
	code := 1
	if err := setup(env); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
	} else {
		code = m.Run()
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
	}
	if code == 0 {
		if err := goleak.Find(append([]goleak.Option{before}, ignore...)...); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: goroutines left after the tests: %v\n", err)
			return 1
		}
	}
	return code
}

// IdleClientGoroutines are the goroutines that outlive a Kubernetes client
// by design: klog's flush daemon and idle keep-alive connections.
func IdleClientGoroutines() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
	}
}
