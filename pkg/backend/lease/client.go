package lease

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/connrotation"

	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// Defaults for ClientOptions fields left zero.
const (
	DefaultQPS   = 5
	DefaultBurst = 10
)

// ClientOptions configures the Kubernetes client of an election.
type ClientOptions struct {
	// Kubeconfig is the path of a kubeconfig file; "" uses the in-cluster
	// configuration of the Pod's service account.
	Kubeconfig string
	// Timeout bounds each request other than a watch (0: no bound).
	// The sidecar passes renewDeadline/2 as an outer bound for every
	// request; the elector cuts a leader's renewals off sooner itself
	// (package election, Room for retries).
	Timeout time.Duration
	// QPS and Burst size the client's own rate limiter (0: DefaultQPS,
	// DefaultBurst).
	QPS   float32
	Burst int
	// UserAgent names the client to the API server, e.g.
	// "leader-sidecar/1.2.3" ("" keeps client-go's default).
	UserAgent string
}

// RESTConfig loads the connection settings named by o.Kubeconfig: the
// file, or the in-cluster configuration when it is empty. Its errors say
// what is missing: the file, or the environment of a Pod.
func RESTConfig(o ClientOptions) (*rest.Config, error) {
	if o.Kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		switch {
		case errors.Is(err, rest.ErrNotInCluster):
			return nil, errors.New("not running in a Kubernetes cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set); " +
				"give a kubeconfig file (--kubeconfig) to reach an API server from elsewhere")
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("in-cluster configuration: the Pod has no service-account token (is automountServiceAccountToken false?): %w", err)
		case err != nil:
			return nil, fmt.Errorf("in-cluster configuration: %w", err)
		}
		return cfg, nil
	}
	if _, err := os.Stat(o.Kubeconfig); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("kubeconfig %q does not exist", o.Kubeconfig)
		}
		return nil, fmt.Errorf("kubeconfig %q: %w", o.Kubeconfig, err)
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig},
		&clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %q: %w", o.Kubeconfig, err)
	}
	return cfg, nil
}

// NewClient returns the sidecar's Kubernetes client (package kubeclient:
// Leases, Pods and Events only) for cfg with o's rate limiter, user agent
// and per-request timeout applied to a copy; cfg itself is not changed.
//
// A request that runs out of time (its own deadline, or the caller's)
// closes every connection the client has open, so the next request dials
// anew (freshAfterTimeout). Over HTTP/2 every request shares one
// connection; when that connection dies silently (a dropped NAT or
// conntrack entry, a dead route), nothing on it is answered again until
// client-go's health check gives it up, up to 45 seconds later at its
// defaults, long after a leader's claim has ended. kubelet closes its
// connections after failed heartbeats for the same reason.
//
// The timeout is enforced per request by a transport wrapper, and the
// copy's Timeout is set to 0: client-go applies rest.Config.Timeout to
// watches too, which would cut every watch off after Timeout and restart
// it again and again, which is polling. Watches are exempt from o.Timeout;
// Backend.Watch bounds them itself (5-10 minutes).
func NewClient(cfg *rest.Config, o ClientOptions) (*kubeclient.Client, error) {
	if cfg == nil {
		return nil, errors.New("lease: no REST config")
	}
	if o.Timeout < 0 || o.QPS < 0 || o.Burst < 0 {
		return nil, fmt.Errorf("lease: negative client option (timeout %v, QPS %v, burst %d)", o.Timeout, o.QPS, o.Burst)
	}
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = o.QPS, o.Burst
	if c.QPS == 0 {
		c.QPS = DefaultQPS
	}
	if c.Burst == 0 {
		c.Burst = DefaultBurst
	}
	c.RateLimiter = nil // a limiter of our own, made from QPS and Burst
	if o.UserAgent != "" {
		c.UserAgent = o.UserAgent
	}
	c.Timeout = 0
	dial := c.Dial
	if dial == nil {
		dial = defaultDialer.DialContext
	}
	dialer := connrotation.NewDialer(dial)
	c.Dial = dialer.DialContext
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &freshAfterTimeout{next: rt, closeAll: dialer.CloseAll}
	})
	if o.Timeout > 0 {
		d := o.Timeout
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &timeoutTransport{next: rt, timeout: d} })
	}
	client, err := kubeclient.New(c)
	if err != nil {
		return nil, fmt.Errorf("lease: Kubernetes client: %w", err)
	}
	return client, nil
}
