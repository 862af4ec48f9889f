// Package kubeclient is the sidecar's one way to the Kubernetes API server:
// where the server is (Source), which namespace the Lease is in
// (ResolveNamespace), and the clients of the three resources the sidecar
// uses, coordination.k8s.io/v1 Leases, core/v1 Pods and events.k8s.io/v1
// Events, on a runtime.Scheme that holds only those kinds and the meta
// types every request needs.
//
// # Guarantees
//
//   - Source finds the server as kubectl does, --kubeconfig, then
//     $KUBECONFIG, then the Pod's service account, but never reads
//     ~/.kube/config. Its errors, and those of ResolveNamespace, name the
//     flag or the variable to fix.
//   - KubectlConfig, for commands a person runs (sidecar status, the
//     kubectl plugin), finds the server and the namespace exactly as
//     kubectl does, ~/.kube/config and the context's namespace included.
//   - A request of a client made by NewClient that runs out of time, by the
//     client's timeout or by its caller's deadline, closes every connection
//     of that client, so the retry dials anew instead of waiting on a
//     connection that may be dead. A request cancelled for another reason
//     closes nothing.
//   - Options.Timeout bounds every request but watches. A watch is never
//     cut off by it; it ends when the server or its caller ends it, or when
//     a timed-out request of the same client closes the connections.
//   - Clients gives the election a client of its own: a Pod patch or an
//     Event that times out never closes the connection of a renewal in
//     flight, nor resets the Lease's watch. Neither client is made, nor any
//     kubeconfig read, before it is first asked for.
//   - One HTTP client (one connection pool) and one rate limiter, made from
//     the config's QPS and Burst unless it carries a RateLimiter, serve all
//     three resources of a Client, as in the clientset.
//   - Objects travel as protobuf, as with the clientset.
//   - A config passed to New or NewClient is copied, never changed.
//
// # Why not client-go's clientset, nor its generic typed clients
//
// k8s.io/client-go/kubernetes, and k8s.io/client-go/kubernetes/scheme,
// which every typed client under k8s.io/client-go/kubernetes/typed
// imports, register every API group of k8s.io/api when the program starts:
// dozens of groups the sidecar never sends, which cost megabytes of binary
// and of heap in every replica. client-go's generic typed clients
// (k8s.io/client-go/gentype) avoid the scheme but import
// k8s.io/client-go/testing for their fakes, and with it managed fields,
// strategic merge patch, the OpenAPI models and their protobuf
// descriptors, all initialised at start-up: about a megabyte of binary and
// of resident memory in every replica (docs/benchmarks.md, Footprint).
// So each resource here makes its requests with client-go's REST client
// (rest.Interface) as the generic typed clients do, verb for verb:
// protobuf first, options encoded by the scheme's parameter codec, the
// answer decoded into the typed object. Requests, errors, rate limiting,
// protobuf encoding and watches are client-go's own; only the scheme is
// smaller, and only the eight operations the sidecar sends exist. Nothing
// in this package imports k8s.io/client-go/kubernetes or
// k8s.io/client-go/gentype.
package kubeclient
