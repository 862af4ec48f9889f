package kubeclient

import (
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Leases reads, writes and watches the Leases of one namespace.
type Leases = gentype.ClientWithList[*coordinationv1.Lease, *coordinationv1.LeaseList]

// Pods reads and patches the Pods of one namespace.
type Pods = gentype.Client[*corev1.Pod]

// Events writes the events.k8s.io/v1 Events of one namespace.
type Events = gentype.Client[*eventsv1.Event]

// Client talks to one API server about Leases, Pods and Events. It is safe
// for concurrent use.
type Client struct {
	coordination, core, events rest.Interface
}

// New returns a Client for cfg: one HTTP client and one rate limiter for
// every resource. cfg is not changed.
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
		gc.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, codecs).WithoutConversion()
		rc, err := rest.RESTClientForConfigAndClient(&gc, httpClient)
		if err != nil {
			return nil, fmt.Errorf("kubeclient: %s: %w", g.gv, err)
		}
		*g.into = rc
	}
	return &out, nil
}

// Leases returns a client of the Leases in namespace.
func (c *Client) Leases(namespace string) *Leases {
	return gentype.NewClientWithList[*coordinationv1.Lease, *coordinationv1.LeaseList](
		"leases", c.coordination, parameterCodec, namespace,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} },
		func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} },
		gentype.PrefersProtobuf[*coordinationv1.Lease]())
}

// Pods returns a client of the Pods in namespace.
func (c *Client) Pods(namespace string) *Pods {
	return gentype.NewClient[*corev1.Pod]("pods", c.core, parameterCodec, namespace,
		func() *corev1.Pod { return &corev1.Pod{} }, gentype.PrefersProtobuf[*corev1.Pod]())
}

// Events returns a client of the events.k8s.io/v1 Events in namespace.
func (c *Client) Events(namespace string) *Events {
	return gentype.NewClient[*eventsv1.Event]("events", c.events, parameterCodec, namespace,
		func() *eventsv1.Event { return &eventsv1.Event{} }, gentype.PrefersProtobuf[*eventsv1.Event]())
}
