package kubeclient

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/client-go/util/flowcontrol"
)

// Client talks to one API server about Leases, Pods and Events. It is safe
// for concurrent use.
type Client struct {
	coordination, core, events rest.Interface
}

// New returns a Client for cfg as it is: one HTTP client and one rate
// limiter for every resource. cfg is not changed. The sidecar's clients
// are made by NewClient, which adds its limits and timeouts.
func New(cfg *rest.Config) (*Client, error) {
	if cfg == nil {
		return nil, errors.New("kubeclient: no REST config")
	}
	c := rest.CopyConfig(cfg)
	if c.RateLimiter == nil && c.QPS > 0 {
		if c.Burst <= 0 {
			return nil, fmt.Errorf("kubeclient: burst must be above 0 with QPS %v", c.QPS)
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubeclient: %w", err)
	}
	k := theKinds()
	var out Client
	for _, g := range []struct {
		into    *rest.Interface
		gv      schema.GroupVersion
		apiPath string
	}{
		{&out.coordination, coordinationv1.SchemeGroupVersion, "/apis"},
		{&out.core, corev1.SchemeGroupVersion, "/api"},
		{&out.events, eventsv1.SchemeGroupVersion, "/apis"},
	} {
		gc := *c
		gc.GroupVersion = &g.gv
		gc.APIPath = g.apiPath
		gc.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(k.scheme, k.codecs).WithoutConversion()
		rc, err := rest.RESTClientForConfigAndClient(&gc, httpClient)
		if err != nil {
			return nil, fmt.Errorf("kubeclient: %s: %w", g.gv, err)
		}
		*g.into = rc
	}
	return &out, nil
}

// Defaults for Options fields left zero.
const (
	DefaultQPS   = 5
	DefaultBurst = 10
)

// Options configures a client made by NewClient.
type Options struct {
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

// NewClient returns a Client for cfg with o's rate limiter, user agent and
// per-request timeout applied to a copy; cfg itself is not changed.
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
// whoever watches bounds them (package lease's watches last five to ten
// minutes).
func NewClient(cfg *rest.Config, o Options) (*Client, error) {
	if cfg == nil {
		return nil, errors.New("kubeclient: no REST config")
	}
	if o.Timeout < 0 || o.QPS < 0 || o.Burst < 0 {
		return nil, fmt.Errorf("kubeclient: negative client option (timeout %v, QPS %v, burst %d)", o.Timeout, o.QPS, o.Burst)
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
	client, err := New(c)
	if err != nil {
		return nil, fmt.Errorf("kubeclient: Kubernetes client: %w", err)
	}
	return client, nil
}

// Leases returns a client of the Leases in namespace.
func (c *Client) Leases(namespace string) *Leases {
	return &Leases{resource{c.coordination, "leases", namespace}}
}

// Pods returns a client of the Pods in namespace.
func (c *Client) Pods(namespace string) *Pods {
	return &Pods{resource{c.core, "pods", namespace}}
}

// Events returns a client of the events.k8s.io/v1 Events in namespace.
func (c *Client) Events(namespace string) *Events {
	return &Events{resource{c.events, "events", namespace}}
}
