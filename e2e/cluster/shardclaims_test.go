//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// This file asks the sidecars of a shard group what they claim, and judges
// the claims: whatever the moves, a shard must never be claimed by two
// holders at one instant.

// shardsAnswer is one Pod's GET /shards, with when it was asked and when
// it answered (the claims it lists held at some instant between).
type shardsAnswer struct {
	pod            string
	sent, answered time.Time
	fence.ShardsJSON
}

// askShards asks the sidecar of a Pod for GET /shards on its loopback
// listener, from inside its container (the image has no shell or curl:
// the sidecar's own probe subcommand prints the body).
func askShards(ctx context.Context, ns, pod string) (shardsAnswer, error) {
	a := shardsAnswer{pod: pod, sent: time.Now()}
	out, err := cl.try(ctx, cl.kubectl, "exec", "--namespace", ns, pod, "--container", sidecarContainer, "--",
		"/sidecar", "probe", "--address", "127.0.0.1:4040", "/shards")
	a.answered = time.Now()
	if err != nil {
		return a, fmt.Errorf("%s: %w", pod, err)
	}
	i := strings.Index(out, "{")
	if i < 0 {
		return a, fmt.Errorf("%s: no JSON in %q", pod, out)
	}
	if err := json.Unmarshal([]byte(out[i:]), &a.ShardsJSON); err != nil {
		return a, fmt.Errorf("%s: %w in %q", pod, err, out)
	}
	return a, nil
}

// sweep asks every Pod at once and returns the answers it got, in the
// order of pods, and the first error.
func sweep(ctx context.Context, ns string, pods []string) ([]shardsAnswer, error) {
	answers := make([]shardsAnswer, len(pods))
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() { answers[i], errs[i] = askShards(ctx, ns, p) })
	}
	wg.Wait()
	var ok []shardsAnswer
	var first error
	for i := range pods {
		if errs[i] != nil {
			first = cmpOr(first, errs[i])
			continue
		}
		ok = append(ok, answers[i])
	}
	return ok, first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// podNames are the names of pods.
func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// claimLog keeps every claim the sidecars answered, shard by shard and
// token by token, and counts the overlaps among them.
type claimLog struct {
	mu sync.Mutex
	// claims[shard][token] are the answers that claimed the shard with
	// the token.
	claims           map[int]map[int64][]claim
	answers, claimed int
}

// claim is one answer's claim of a shard.
type claim struct {
	pod, identity  string
	sent, answered time.Time
}

func newClaimLog() *claimLog { return &claimLog{claims: map[int]map[int64][]claim{}} }

// add takes in the claims of answers.
func (l *claimLog) add(answers []shardsAnswer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range answers {
		l.answers++
		for _, h := range a.Held {
			byToken := l.claims[h.Shard]
			if byToken == nil {
				byToken = map[int64][]claim{}
				l.claims[h.Shard] = byToken
			}
			byToken[h.Token] = append(byToken[h.Token], claim{pod: a.pod, identity: a.Identity, sent: a.sent, answered: a.answered})
			l.claimed++
		}
	}
}

// overlaps counts the claims that prove a shard claimed by two holders at
// one instant, and describes the first few:
//
//   - a claim of a token by another identity than the token's first
//     claimant (one term has one holder);
//   - a claim of a token asked after a claim of a higher token of the
//     shard had been answered: the older term's holder still claimed
//     the shard after the newer term had begun.
//
// Claims are answers asked one after another, so two Pods listing one
// shard in one sweep prove nothing by themselves: the first may have
// released it before the second took it.
func (l *claimLog) overlaps() (n int, first []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	report := func(format string, args ...any) {
		n++
		if len(first) < 5 {
			first = append(first, fmt.Sprintf(format, args...))
		}
	}
	for shard, byToken := range l.claims {
		tokens := make([]int64, 0, len(byToken))
		for tok := range byToken {
			tokens = append(tokens, tok)
		}
		slices.Sort(tokens)
		// newerAnswered[k]: the earliest answer of a claim of a token
		// above tokens[k].
		newerAnswered := make([]time.Time, len(tokens))
		var earliest time.Time
		for k := len(tokens) - 1; k >= 0; k-- {
			newerAnswered[k] = earliest
			for _, c := range byToken[tokens[k]] {
				if earliest.IsZero() || c.answered.Before(earliest) {
					earliest = c.answered
				}
			}
		}
		for k, tok := range tokens {
			cs := byToken[tok]
			for _, c := range cs {
				if c.identity != cs[0].identity {
					report("shard %d token %d claimed by %s (%s) and %s (%s)", shard, tok, cs[0].pod, cs[0].identity, c.pod, c.identity)
				}
				if !newerAnswered[k].IsZero() && c.sent.After(newerAnswered[k]) {
					report("shard %d: %s claimed token %d when asked at %s, after a higher token's claim answered at %s",
						shard, c.pod, tok, c.sent.Format(time.StampMilli), newerAnswered[k].Format(time.StampMilli))
				}
			}
		}
	}
	return n, first
}

// check fails t if any claims overlap, and logs how many were judged.
func (l *claimLog) check(t *testing.T) {
	t.Helper()
	n, first := l.overlaps()
	l.mu.Lock()
	answers, claimed := l.answers, l.claimed
	l.mu.Unlock()
	t.Logf("claims judged: %d in %d answers of GET /shards; overlaps: %d", claimed, answers, n)
	if n != 0 {
		t.Errorf("%d claims of a shard overlap another holder's: %s", n, strings.Join(first, "; "))
	}
	if claimed == 0 {
		t.Errorf("no claim was sampled")
	}
}

// sampleShards sweeps every Pod of the release whose sidecar runs
// (terminating ones too: a Pod drains and releases its shards while it
// stops) into claims until ctx ends; the channel is closed then.
func sampleShards(ctx context.Context, ns string, claims *claimLog) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := cl.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
			if err == nil {
				var running []string
				for _, p := range list.Items {
					if sidecarRunning(p) {
						running = append(running, p.Name)
					}
				}
				answers, _ := sweep(ctx, ns, running)
				claims.add(answers)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return done
}

// sidecarRunning reports whether the Pod's sidecar container runs.
func sidecarRunning(p corev1.Pod) bool {
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if s.Name == sidecarContainer && s.State.Running != nil {
			return true
		}
	}
	return false
}
