//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestUpgradeWithLeaderOnlyReadiness installs the example chart (three
// replicas) in each leader-only readiness mode, where the chart renders the
// Recreate strategy, and runs `helm upgrade` with a changed Pod annotation.
// While the Deployment rolls, every Pod's /leader/ready (on its ops port, by
// Pod IP through the API server's Pod proxy) is asked every 100 ms, all
// Pods at once: no round ever finds two leaders, the rollout completes,
// every Pod is new, and the new leader's token is above the old one.
func TestUpgradeWithLeaderOnlyReadiness(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"probe", "pod-condition"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			ns := cl.namespace(t)
			install(t, ctx, ns, "--set", "replicaCount=3", "--set", "sidecar.readiness.mode="+mode)
			pods := runningPods(t, ctx, ns, 3, false)
			var before int64
			eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
				st, _, reason := oneLeader(ctx, ns, pods)
				if reason == "" {
					before = *st.Token
				}
				return reason == "", reason
			})
			d, err := cl.client.AppsV1().Deployments(ns).Get(ctx, fullName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
				t.Fatalf("strategy %s in mode %s, want Recreate", d.Spec.Strategy.Type, mode)
			}

			s := &sampler{ns: ns, newLeader: make(chan struct{})}
			sampling, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			var sampleErr error
			go func() { defer close(done); sampleErr = s.run(sampling) }()
			start := time.Now()
			cl.run(t, ctx, cl.helm, "upgrade", release, filepath.Join(cl.root, "charts", "leader-sidecar-example"), "--namespace", ns, "--reuse-values",
				"--set-string", "podAnnotations.e2e/rollout=2")
			// `kubectl rollout status` never returns here: it waits for every
			// replica to be available, and followers are never Ready. The
			// rollout is complete when the Deployment has only new replicas,
			// each running, and exactly one of them leads and is Ready.
			rollout, stopRollout := context.WithTimeout(ctx, 3*time.Minute)
			defer stopRollout()
			var current []corev1.Pod
			eventually(t, rollout, "the Deployment rolled out", func() (bool, string) {
				return rolledOut(rollout, ns)
			})
			rolled := time.Since(start)
			var after int64
			eventually(t, rollout, "exactly one leader among the new Pods, and it alone Ready", func() (bool, string) {
				current = runningPods(t, rollout, ns, 3, false)
				st, pod, reason := oneLeader(rollout, ns, current)
				if reason != "" {
					return false, reason
				}
				after = *st.Token
				return routed(rollout, ns, mode, pod)
			})
			select { // the new leader in the samples too
			case <-s.newLeader:
			case <-time.After(30 * time.Second):
			}
			stop()
			<-done
			if sampleErr != nil {
				t.Fatal(sampleErr)
			}

			old := map[string]bool{}
			for _, p := range pods {
				old[p.Name] = true
			}
			for _, p := range current {
				if old[p.Name] {
					t.Errorf("Pod %s was not replaced", p.Name)
				}
			}
			t.Logf("rolled out in %v; %d rounds of samples, leaderless from %v to %v (%v); token %d before, %d after",
				rolled.Round(time.Millisecond), s.rounds, s.lastOld.Sub(start).Round(time.Millisecond),
				s.firstNew.Sub(start).Round(time.Millisecond), s.firstNew.Sub(s.lastOld).Round(time.Millisecond), before, after)
			t.Logf("leaders in turn: %q", s.seen)
			if len(s.overlaps) > 0 {
				t.Errorf("%d rounds found two or more leaders, the first: %s", len(s.overlaps), s.overlaps[0])
			}
			if s.lastOld.IsZero() || s.firstNew.IsZero() {
				t.Errorf("the samples did not see both the old leader (%v) and the new one (%v)", s.lastOld, s.firstNew)
			}
			if after <= before {
				t.Errorf("token %d after the rollout, %d before", after, before)
			}
		})
	}
}

// rolledOut says whether the Deployment has only replicas of its current
// template, as many as it wants, and none of them terminating.
func rolledOut(ctx context.Context, ns string) (bool, string) {
	d, err := cl.client.AppsV1().Deployments(ns).Get(ctx, fullName, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	st := d.Status
	if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != *d.Spec.Replicas ||
		st.Replicas != *d.Spec.Replicas || st.TerminatingReplicas != nil && *st.TerminatingReplicas != 0 {
		return false, fmt.Sprintf("generation %d observed %d, replicas %d updated %d, want %d",
			d.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, *d.Spec.Replicas)
	}
	return true, ""
}

// sampler asks every Pod of the release for /leader/ready on its ops port
// every 100 ms, all at once, and keeps what it saw.
type sampler struct {
	ns                string
	client            kubernetes.Interface
	rounds            int
	overlaps          []string
	old               map[string]bool // the Pods of the first round
	lastOld, firstNew time.Time       // a leader among the old Pods, the new Pods
	seen              []string        // each leader in turn, "old" or "new" and its Pod
	newLeader         chan struct{}   // closed when a new Pod is first seen leading
}

func (s *sampler) run(ctx context.Context) error {
	// A client of its own, not throttled at client-go's default 5 requests
	// a second.
	cfg, err := clientcmd.BuildConfigFromFlags("", cl.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	if s.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	for ctx.Err() == nil {
		round := time.Now()
		list, err := s.client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err == nil {
			s.sample(ctx, list.Items, round)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(round.Add(100 * time.Millisecond))):
		}
	}
	return nil
}

func (s *sampler) sample(ctx context.Context, pods []corev1.Pod, round time.Time) {
	if s.old == nil {
		s.old = map[string]bool{}
		for _, p := range pods {
			s.old[p.Name] = true
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var leaders []string
	for _, p := range pods {
		if p.Status.PodIP == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A Pod whose address is gone must not hold up the round.
			ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			_, err := s.client.CoreV1().RESTClient().Get().Namespace(s.ns).Resource("pods").
				Name(p.Name + ":8081").SubResource("proxy").Suffix("leader/ready").DoRaw(ctx)
			if err == nil { // 200 only while leading; 503 is an error here
				mu.Lock()
				leaders = append(leaders, p.Name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// A round that took over a second is not a moment: it is not judged.
	if ctx.Err() != nil || time.Since(round) > time.Second {
		return
	}
	s.rounds++
	if len(leaders) > 1 {
		s.overlaps = append(s.overlaps, fmt.Sprintf("%v at %v", leaders, round.Format(time.RFC3339Nano)))
	}
	for _, l := range leaders {
		age := "new "
		if s.old[l] {
			age = "old "
		}
		if len(s.seen) == 0 || s.seen[len(s.seen)-1] != age+l {
			s.seen = append(s.seen, age+l)
		}
		switch {
		case s.old[l]:
			s.lastOld = round
		case s.firstNew.IsZero():
			s.firstNew = round
			close(s.newLeader)
		}
	}
}
