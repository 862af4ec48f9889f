// Package podreadiness publishes this replica's leadership on its own Pod,
// so Kubernetes can act on it:
//
//   - ModePodCondition keeps a condition (e.g. leader-sidecar.io/leader) in
//     the Pod's status.conditions, for spec.readinessGates: only the leader
//     is Ready;
//   - ModeLabel keeps a label (<domain>/role: leader|follower), so a Service
//     can select the leader alone while every Pod stays Ready.
//
// Guarantees: a Publisher never blocks the election (it works on its own
// goroutine, from the latest state it was told); it patches only when the
// Pod differs from the wanted state; a condition's lastTransitionTime moves
// only when its status flips; every patch carries the Pod's UID as a
// precondition, so a Pod recreated under the same name is never touched.
// Failed patches are retried with backoff until they succeed or a newer
// state replaces them. The Pod is a signal for routing and readiness, not a
// fence: it lags the election by a request, and a paused leader's Pod keeps
// its condition until its sidecar wakes; use the fencing token for safety.
package podreadiness
