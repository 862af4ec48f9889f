package apiserver

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// createPod creates a Pod object (no kubelet runs it) for a sidecar to
// publish on, and returns its UID.
func createPod(t *testing.T, k *sidecartest.KubeEnv, ns, name string) string {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	pod, err := k.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(pod.UID)
}

// markedPods lists the Pods that show leadership in mode.
func markedPods(t *testing.T, k *sidecartest.KubeEnv, ns, mode string) []string {
	t.Helper()
	pods, err := k.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
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
func awaitMarked(t *testing.T, k *sidecartest.KubeEnv, ns, mode, want string) {
	t.Helper()
	deadline := time.Now().Add(3 * sidecartest.LeaseDuration)
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
			k := sidecartest.Kube(t)
			ns, name := k.Namespace(t), "ready"
			kc := k.Kubeconfig(t, "")
			pods := map[*sidecartest.Sidecar]string{}
			var all []*sidecartest.Sidecar
			for _, pod := range []string{"app-0", "app-1", "app-2"} {
				uid := createPod(t, k, ns, pod)
				s := sidecartest.Spawn(t, []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + ns, "POD_UID=" + uid},
					"--backend", "lease", "--kubeconfig", kc, "--lease-name", name, "--readiness-mode", mode)
				s.WaitServing()
				pods[s] = pod
				all = append(all, s)
			}
			first, _ := sidecartest.AwaitLeader(t, all, 15*time.Second)
			awaitMarked(t, k, ns, mode, pods[first])

			// A graceful stop takes the mark off before the lease is
			// released, so the mark moves without two Pods ever showing it.
			first.Signal(syscall.SIGTERM)
			rest := sidecartest.Without(all, first)
			second, _ := sidecartest.AwaitLeader(t, rest, sidecartest.LeaseDuration)
			awaitMarked(t, k, ns, mode, pods[second])
			if code := first.WaitExit(10 * time.Second); code != 0 {
				t.Fatalf("exit status %d", code)
			}

			// kill -9: the killed sidecar cannot take its mark back (in a
			// cluster its container restarts and does); the new leader's
			// Pod is marked all the same.
			second.Signal(syscall.SIGKILL)
			third, _ := sidecartest.AwaitLeader(t, sidecartest.Without(rest, second), 3*sidecartest.LeaseDuration)
			deadline := time.Now().Add(3 * sidecartest.LeaseDuration)
			for !slices.Contains(markedPods(t, k, ns, mode), pods[third]) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: the new leader's Pod %s is not marked", mode, pods[third])
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
