// Package podreadiness publishes this replica's leadership on its own Pod,
// so Kubernetes can act on it:
//
//   - ModePodCondition keeps a condition (e.g. leader-sidecar.io/leader) in
//     the Pod's status.conditions, for spec.readinessGates: only the leader
//     is Ready;
//   - ModeLabel keeps a label (<domain>/role: leader|follower), so a Service
//     can select the leader alone while every Pod stays Ready;
//   - DeletionCost, with any mode, keeps the annotation
//     controller.kubernetes.io/pod-deletion-cost at LeaderDeletionCost while
//     the replica leads and removes it when the term ends, so a ReplicaSet
//     removes the leader's Pod last and a rollout moves leadership once.
//
// Guarantees: a Publisher never blocks the election (it works on its own
// goroutine, from the latest state it was told); it patches only when the
// Pod differs from the wanted state, with one patch of the metadata (label
// and cost together) and one of the status per transition; a condition's
// lastTransitionTime moves only when its status flips; every patch carries
// the Pod's UID as a precondition, so a Pod recreated under the same name
// is never touched. It is level-triggered: while the replica leads it
// reads its Pod again every ResyncPeriod and repairs what someone else
// changed (saying so once); a standby's Pod is read at every change only.
// Failed patches are retried with backoff until they succeed or a newer
// state replaces them.
//
// The deletion cost is this sidecar's only while the Pod carries
// LeaderDeletionCost or none: another value (a Pod template's, Karpenter's
// deletion-cost manager's) is reported once, naming its field manager, and
// left alone; a patch of the cost carries the resourceVersion it read, so
// a value written meanwhile is never overwritten. When the API server
// refuses the cost (the Pod's Role has no get or patch on pods), the
// Publisher says so once and stops keeping it; the election never notices.
//
// The Pod is a signal for routing, readiness and scale-down order, not a
// fence: it lags the election by a request, and a paused leader's Pod keeps
// its mark until its sidecar wakes; use the fencing token for safety.
package podreadiness
