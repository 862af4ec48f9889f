package e2e

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// createPod creates a Pod object (no kubelet runs it) for a sidecar to
// publish on, and returns its UID.
func createPod(t *testing.T, k *kubeEnv, ns, name string) string {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	pod, err := k.client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(pod.UID)
}

// markedPods lists the Pods that show leadership in mode.
func markedPods(t *testing.T, k *kubeEnv, ns, mode string) []string {
	t.Helper()
	pods, err := k.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var marked []string
	for _, p := range pods.Items {
		if mode == "label" && p.Labels["leader-sidecar.io/role"] == "leader" {
			marked = append(marked, p.Name)
		}
		for _, c := range p.Status.Conditions {
			if mode == "pod-condition" && c.Type == "leader-sidecar.io/leader" && c.Status == corev1.ConditionTrue {
				marked = append(marked, p.Name)
			}
		}
	}
	return marked
}

// awaitMarked waits until exactly the Pod want is marked, failing if two
// Pods are ever marked at once.
func awaitMarked(t *testing.T, k *kubeEnv, ns, mode, want string) {
	t.Helper()
	deadline := time.Now().Add(3 * leaseDuration)
	for {
		marked := markedPods(t, k, ns, mode)
		if len(marked) > 1 {
			t.Fatalf("%s: Pods %v all show leadership", mode, marked)
		}
		if len(marked) == 1 && marked[0] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: marked Pods %v, want only %s", mode, marked, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLeadershipShownOnThePod(t *testing.T) {
	for _, mode := range []string{"pod-condition", "label"} {
		t.Run(mode, func(t *testing.T) {
			k := kube(t)
			ns, name := k.namespace(t), "ready"
			kc := k.kubeconfig(t, "")
			pods := map[*sidecar]string{}
			var all []*sidecar
			for _, pod := range []string{"app-0", "app-1", "app-2"} {
				uid := createPod(t, k, ns, pod)
				s := spawn(t, []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + ns, "POD_UID=" + uid},
					"--backend", "lease", "--kubeconfig", kc, "--lease-name", name, "--readiness-mode", mode)
				s.waitServing()
				pods[s] = pod
				all = append(all, s)
			}
			first, _ := awaitLeader(t, all, 15*time.Second)
			awaitMarked(t, k, ns, mode, pods[first])

			// A graceful stop takes the mark off before the lease is
			// released, so the mark moves without two Pods ever showing it.
			first.signal(syscall.SIGTERM)
			rest := without(all, first)
			second, _ := awaitLeader(t, rest, leaseDuration)
			awaitMarked(t, k, ns, mode, pods[second])
			if code := first.waitExit(10 * time.Second); code != 0 {
				t.Fatalf("exit status %d", code)
			}

			// kill -9: the killed sidecar cannot take its mark back (in a
			// cluster its container restarts and does); the new leader's
			// Pod is marked all the same.
			second.signal(syscall.SIGKILL)
			third, _ := awaitLeader(t, without(rest, second), 3*leaseDuration)
			deadline := time.Now().Add(3 * leaseDuration)
			for !slices.Contains(markedPods(t, k, ns, mode), pods[third]) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: the new leader's Pod %s is not marked", mode, pods[third])
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
