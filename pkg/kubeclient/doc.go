// Package kubeclient is the sidecar's client of the Kubernetes API: typed
// clients for the three resources it uses, coordination.k8s.io/v1 Leases,
// core/v1 Pods and events.k8s.io/v1 Events, on a runtime.Scheme that holds
// only those kinds and the meta types every request needs.
//
// # Why not client-go's clientset
//
// k8s.io/client-go/kubernetes, and k8s.io/client-go/kubernetes/scheme,
// which every typed client under k8s.io/client-go/kubernetes/typed
// imports, register every API group of k8s.io/api when the program starts:
// dozens of groups the sidecar never sends, which cost megabytes of binary
// and of heap in every replica. The clients here are client-go's own
// generic typed clients (k8s.io/client-go/gentype) over client-go's REST
// client, so requests, errors, rate limiting, protobuf encoding and
// watches behave exactly as with the clientset; only the scheme is
// smaller. Nothing in this package imports k8s.io/client-go/kubernetes.
//
// # Guarantees
//
//   - One HTTP client (one connection pool) and one rate limiter, made from
//     the config's QPS and Burst unless it carries a RateLimiter, serve all
//     three resources, as in the clientset.
//   - Objects travel as protobuf, as with the clientset.
//   - The config passed to New is copied, never changed.
package kubeclient
