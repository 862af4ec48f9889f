package podreadiness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Label values of ModeLabel.
const (
	RoleLeader   = "leader"
	RoleFollower = "follower"
)

func (p *Publisher) pod(ctx context.Context) (*corev1.Pod, error) {
	pod, err := p.cfg.Client.Pods(p.cfg.Namespace).Get(ctx, p.cfg.Name, metav1.GetOptions{})
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

func (p *Publisher) publishLabel(ctx context.Context, leading bool) error {
	want := RoleFollower
	if leading {
		want = RoleLeader
	}
	pod, err := p.pod(ctx)
	if err != nil {
		return err
	}
	if pod.Labels[p.cfg.LabelKey] == want {
		return nil
	}
	meta := p.precondition()
	meta["labels"] = map[string]string{p.cfg.LabelKey: want}
	return p.patch(ctx, map[string]any{"metadata": meta}, "")
}

func (p *Publisher) publishCondition(ctx context.Context, leading bool, token int64) error {
	want := corev1.PodCondition{Type: corev1.PodConditionType(p.cfg.ConditionType), Status: corev1.ConditionFalse,
		Reason: "NotLeader", Message: p.cfg.Identity + " does not lead"}
	if leading {
		want.Status, want.Reason = corev1.ConditionTrue, "Leader"
		want.Message = fmt.Sprintf("%s leads with fencing token %d", p.cfg.Identity, token)
	}
	pod, err := p.pod(ctx)
	if err != nil {
		return err
	}
	want.LastTransitionTime = metav1.NewTime(time.Now())
	for _, c := range pod.Status.Conditions {
		if c.Type != want.Type {
			continue
		}
		if c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message {
			return nil // nothing would change
		}
		if c.Status == want.Status {
			want.LastTransitionTime = c.LastTransitionTime // no flip
		}
	}
	body := map[string]any{
		"metadata": p.precondition(),
		"status":   map[string]any{"conditions": []corev1.PodCondition{want}},
	}
	return p.patch(ctx, body, "status")
}

// patch sends a strategic merge patch (conditions merge by type, labels by
// key) to the Pod or its subresource.
func (p *Publisher) patch(ctx context.Context, body map[string]any, subresource string) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	_, err = p.cfg.Client.Pods(p.cfg.Namespace).Patch(ctx, p.cfg.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{}, sub...)
	if err != nil {
		return fmt.Errorf("patch Pod %s/%s %s: %w", p.cfg.Namespace, p.cfg.Name, subresource, err)
	}
	return nil
}
