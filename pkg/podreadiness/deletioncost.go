package podreadiness

import (
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The leader is removed last: while this replica leads, its Pod carries a
// deletion cost above any other, so a ReplicaSet scaling down (a rollout,
// a scale-in) removes every other Pod of its own first
// (https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/#pod-deletion-cost).

const (
	// DeletionCostAnnotation is the annotation a ReplicaSet ranks its Pods
	// by when it removes some: the lower cost goes first.
	DeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"
	// LeaderDeletionCost is the leader's cost: the largest the annotation
	// takes (an int32). Only a Pod carrying exactly this value is taken
	// for one this sidecar marked.
	LeaderDeletionCost = "2147483647"
	// FieldManager is the field manager of every patch a Publisher sends.
	FieldManager = "leader-sidecar"
)

// costStep says whether the Pod's deletion cost must change for the state
// leading, and to what (nil: remove it). The cost is this sidecar's only
// while it carries LeaderDeletionCost or none: another value is someone
// else's (a Pod template's, Karpenter's deletion-cost manager), which is
// reported once and left alone.
func (p *Publisher) costStep(pod *corev1.Pod, leading bool) (change bool, value any) {
	if !p.costEnabled() {
		return false, nil
	}
	v, ok := pod.Annotations[DeletionCostAnnotation]
	switch {
	case ok && v != LeaderDeletionCost:
		p.costOwnedElsewhere(v, costManager(pod))
		return false, nil
	case leading && !ok:
		return true, LeaderDeletionCost
	case !leading && ok:
		return true, nil
	}
	return false, nil
}

// costEnabled reports whether the Publisher keeps the deletion cost: it
// was asked to, and the Pod's RBAC has not refused it.
func (p *Publisher) costEnabled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.DeletionCost && !p.costOff
}

// costForbidden turns the deletion cost off for good after the API server
// refused it (the Role grants no get or patch on pods), and says so once.
func (p *Publisher) costForbidden(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.costOff {
		return
	}
	p.costOff = true
	p.log.Warn("the Pod's RBAC does not let this sidecar mark its Pod: the leader's Pod carries no deletion cost, so a rollout may move leadership more than once "+
		"(grant get and patch on pods, or turn the mark off with --pod-deletion-cost=false)",
		"annotation", DeletionCostAnnotation, "err", err)
}

// costOwnedElsewhere says once that another writer owns the deletion cost.
func (p *Publisher) costOwnedElsewhere(value, manager string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.costForeignSeen {
		return
	}
	p.costForeignSeen = true
	p.log.Warn("the Pod's deletion cost is set by someone else; this sidecar leaves it alone, and the leader's Pod is not kept for last",
		"annotation", DeletionCostAnnotation, "value", value, "manager", manager)
}

// costManager is the field manager that last wrote the Pod's deletion
// cost, by its managedFields ("" if none names it).
func costManager(pod *corev1.Pod) string {
	key := "f:" + DeletionCostAnnotation
	var managers []string
	for _, m := range pod.ManagedFields {
		if m.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(m.FieldsV1.Raw, &fields) == nil {
			if _, ok := fields.Metadata.Annotations[key]; ok {
				managers = append(managers, m.Manager)
			}
		}
	}
	return strings.Join(managers, ",")
}
