package podreadiness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Label values of ModeLabel.
const (
	RoleLeader   = "leader"
	RoleFollower = "follower"
)

// podAPI is what a Publisher asks of the API server about its Pod:
// kubeclient.Pods, or a fake in unit tests.
type podAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
}

func (p *Publisher) pod(ctx context.Context) (*corev1.Pod, error) {
	pod, err := p.pods.Get(ctx, p.cfg.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get Pod %s/%s: %w", p.cfg.Namespace, p.cfg.Name, err)
	}
	if string(pod.UID) != p.cfg.UID {
		return nil, fmt.Errorf("Pod %s/%s has UID %s, not this sidecar's %s", p.cfg.Namespace, p.cfg.Name, pod.UID, p.cfg.UID)
	}
	return pod, nil
}

// precondition is the part of every patch that makes the API server
// refuse it if the Pod is not the one this sidecar runs in.
func (p *Publisher) precondition() map[string]any {
	return map[string]any{"uid": p.cfg.UID}
}

// publish brings the Pod in line with the state given: one read, then at
// most one patch of its metadata (the role label, the deletion cost) and
// one of its status (the condition). changed reports whether anything had
// to be written.
func (p *Publisher) publish(ctx context.Context, leading bool, token int64) (changed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pod, err := p.pod(ctx)
	if err != nil {
		if apierrors.IsForbidden(err) && !p.cfg.Mode.PublishesOnPod() {
			p.costForbidden(err) // the deletion cost alone needed the Pod
			return false, nil
		}
		return false, err
	}
	meta := p.precondition()
	var labels map[string]any
	if p.cfg.Mode == ModeLabel {
		if want := labelValue(leading); pod.Labels[p.cfg.LabelKey] != want {
			labels = map[string]any{p.cfg.LabelKey: want}
			meta["labels"] = labels
		}
	}
	cost, costValue := p.costStep(pod, leading)
	if cost {
		// The Pod's version as read: a deletion cost written by someone
		// else since is seen on the retry, never overwritten.
		meta["resourceVersion"] = pod.ResourceVersion
		meta["annotations"] = map[string]any{DeletionCostAnnotation: costValue}
	}
	if labels != nil || cost {
		err := p.patch(ctx, map[string]any{"metadata": meta}, "")
		switch {
		case err != nil && cost && apierrors.IsForbidden(err):
			p.costForbidden(err)
			if labels != nil {
				return true, err // the label alone is retried
			}
			return false, nil
		case err != nil:
			return true, err
		}
		changed = true
	}
	if p.cfg.Mode == ModePodCondition {
		if want, ok := p.conditionStep(pod, leading, token); ok {
			body := map[string]any{
				"metadata": p.precondition(),
				"status":   map[string]any{"conditions": []corev1.PodCondition{want}},
			}
			if err := p.patch(ctx, body, "status"); err != nil {
				return true, err
			}
			changed = true
		}
	}
	return changed, nil
}

func labelValue(leading bool) string {
	if leading {
		return RoleLeader
	}
	return RoleFollower
}

// conditionStep returns the condition to write, if the Pod's differs.
func (p *Publisher) conditionStep(pod *corev1.Pod, leading bool, token int64) (corev1.PodCondition, bool) {
	want := corev1.PodCondition{Type: corev1.PodConditionType(p.cfg.ConditionType), Status: corev1.ConditionFalse,
		Reason: "NotLeader", Message: p.cfg.Identity + " does not lead"}
	if leading {
		want.Status, want.Reason = corev1.ConditionTrue, "Leader"
		want.Message = fmt.Sprintf("%s leads with fencing token %d", p.cfg.Identity, token)
	}
	want.LastTransitionTime = metav1.NewTime(time.Now())
	for _, c := range pod.Status.Conditions {
		if c.Type != want.Type {
			continue
		}
		if c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message {
			return want, false // nothing would change
		}
		if c.Status == want.Status {
			want.LastTransitionTime = c.LastTransitionTime // no flip
		}
	}
	return want, true
}

// patch sends a strategic merge patch (conditions merge by type, labels
// and annotations by key; a null value removes the key) to the Pod or its
// subresource.
func (p *Publisher) patch(ctx context.Context, body map[string]any, subresource string) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	_, err = p.pods.Patch(ctx, p.cfg.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{FieldManager: FieldManager}, sub...)
	if err != nil {
		return fmt.Errorf("patch Pod %s/%s %s: %w", p.cfg.Namespace, p.cfg.Name, subresource, err)
	}
	return nil
}
