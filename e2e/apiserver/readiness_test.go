package apiserver

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

func TestLeadershipShownOnThePod(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"pod-condition", "label"} {
		t.Run(mode, func(t *testing.T) {
			k := sidecartest.Kube(t)
			ns, name := k.Namespace(t), "ready"
			kc := k.Kubeconfig(t, "")
			pods := map[*sidecartest.Sidecar]string{}
			var all []*sidecartest.Sidecar
			for _, pod := range []string{"app-0", "app-1", "app-2"} {
				uid := k.CreatePod(t, ns, pod)
				s := sidecartest.Spawn(t, []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + ns, "POD_UID=" + uid},
					"--backend", "lease", "--kubeconfig", kc, "--lease-name", name, "--readiness-mode", mode)
				s.WaitServing()
				pods[s] = pod
				all = append(all, s)
			}
			first, _ := sidecartest.AwaitLeader(t, all, 15*time.Second)
			k.AwaitMarked(t, ns, mode, pods[first])

			// A graceful stop takes the mark off before the lease is
			// released, so the mark moves without two Pods ever showing it.
			first.Signal(syscall.SIGTERM)
			rest := sidecartest.Without(all, first)
			second, _ := sidecartest.AwaitLeader(t, rest, sidecartest.LeaseDuration)
			k.AwaitMarked(t, ns, mode, pods[second])
			if code := first.WaitExit(10 * time.Second); code != 0 {
				t.Fatalf("exit status %d", code)
			}

			// kill -9: the killed sidecar cannot take its mark back (in a
			// cluster its container restarts and does); the new leader's
			// Pod is marked all the same.
			second.Signal(syscall.SIGKILL)
			third, _ := sidecartest.AwaitLeader(t, sidecartest.Without(rest, second), 3*sidecartest.LeaseDuration)
			deadline := time.Now().Add(3 * sidecartest.LeaseDuration)
			for !slices.Contains(k.MarkedPods(t, ns, mode), pods[third]) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: the new leader's Pod %s is not marked", mode, pods[third])
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
