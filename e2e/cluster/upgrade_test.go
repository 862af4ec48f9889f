//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
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
			finishSampling := s.start(ctx)
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
			if err := finishSampling(); err != nil {
				t.Fatal(err)
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
			s.twoLeaders(t, "the upgrade")
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
// every 100 ms, all at once, and keeps what it saw: each 200 with the
// token of the term it answers for (the Leader-Sidecar-Token header) and
// when it was asked and answered, in a sidecartest.ClaimLog, which judges
// two claims simultaneous only when they must have been (one token claimed
// by two Pods, or an older term's claim asked for after a newer term's
// had arrived): a round's answers come over tens of milliseconds, and two
// of them may be a hand-off between them.
type sampler struct {
	ns string
	// newStore: the new Pods elect in another store than the old ones, so
	// their terms are newer than every old term whatever their tokens.
	newStore bool
	http     *http.Client
	host     string
	log      sidecartest.ClaimLog
	rounds   int
	// old holds the UIDs of the Pods of the first round: by UID, not name,
	// since a StatefulSet's new Pod has its old Pod's name.
	old               map[types.UID]bool
	lastOld, firstNew time.Time     // a leader among the old Pods, the new Pods
	seen              []string      // each leader in turn, "old" or "new" and its Pod
	newLeader         chan struct{} // closed when a new Pod is first seen leading
	// leaderlessSince is the start of the first round that found no
	// leader after one that did (zero while one leads), and
	// longestLeaderless the longest such stretch closed so far, from that
	// round to the next that found a leader. A round that could not reach
	// the leader's Pod counts as leaderless: an upper bound, to a round.
	leaderlessSince   time.Time
	longestLeaderless time.Duration
}

// start runs s until the function it returns is called, which waits for
// it and returns what run returned; calling it again returns the same.
func (s *sampler) start(ctx context.Context) (finish func() error) {
	sampling, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	var err error
	go func() { defer close(done); err = s.run(sampling) }()
	return func() error {
		stop()
		<-done
		return err
	}
}

func (s *sampler) run(ctx context.Context) error {
	// A client of its own, not throttled at client-go's default 5 requests
	// a second.
	cfg, err := clientcmd.BuildConfigFromFlags("", cl.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if s.http, err = rest.HTTPClientFor(cfg); err != nil {
		return err
	}
	s.host = strings.TrimSuffix(cfg.Host, "/")
	for ctx.Err() == nil {
		round := time.Now()
		list, err := client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
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
		s.old = map[types.UID]bool{}
		for _, p := range pods {
			s.old[p.UID] = true
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var leaders []corev1.Pod
	sweep := s.rounds
	for _, p := range pods {
		if p.Status.PodIP == "" {
			continue
		}
		wg.Go(func() {
			// A Pod whose address is gone must not hold up the round.
			ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			url := fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s:8081/proxy/leader/ready", s.host, s.ns, p.Name)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return
			}
			sent := time.Now()
			resp, err := s.http.Do(req)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answered := time.Now()
			if resp.StatusCode != http.StatusOK { // 503 while not leading
				return
			}
			token, err := strconv.ParseInt(resp.Header.Get(httpapi.TokenHeader), 10, 64)
			if err != nil {
				return
			}
			term := sidecartest.Term{Token: token}
			if s.newStore && !s.old[p.UID] {
				term.Epoch = 1
			}
			// The UID tells a StatefulSet's old and new Pod of one name apart.
			who := p.Name + "/" + string(p.UID)
			s.log.Add(sidecartest.Claim{Who: who, Term: term, Sweep: sweep, Sent: sent, Answer: answered})
			mu.Lock()
			leaders = append(leaders, p)
			mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	s.rounds++
	switch {
	case len(leaders) == 0 && s.leaderlessSince.IsZero():
		s.leaderlessSince = round
	case len(leaders) > 0 && !s.leaderlessSince.IsZero():
		s.longestLeaderless = max(s.longestLeaderless, round.Sub(s.leaderlessSince))
		s.leaderlessSince = time.Time{}
	}
	for _, l := range leaders {
		age := "new "
		if s.old[l.UID] {
			age = "old "
		}
		if len(s.seen) == 0 || s.seen[len(s.seen)-1] != age+l.Name {
			s.seen = append(s.seen, age+l.Name)
		}
		switch {
		case s.old[l.UID]:
			s.lastOld = round
		case s.firstNew.IsZero():
			s.firstNew = round
			close(s.newLeader)
		}
	}
}

// twoLeaders fails t if the samples prove two Pods claimed at one instant.
func (s *sampler) twoLeaders(t *testing.T, what string) {
	t.Helper()
	if n, longest := s.log.Overlaps(); n > 0 {
		t.Errorf("%s: %d claims of an older term were asked for after a newer term's claim had arrived (longest %v after)", what, n, longest)
	}
	if n := s.log.TwoLeaderSweeps(); n > 0 {
		t.Errorf("%s: %d rounds had two Pods claim at one instant", what, n)
	}
}
