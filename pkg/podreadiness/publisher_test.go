package podreadiness

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/kubetest"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

var (
	env *kubetest.Env
	// client is the sidecar's own Kubernetes client, which the Publisher
	// uses; env.Client (client-go's clientset) checks what it did.
	client *kubeclient.Client
)

func TestMain(m *testing.M) {
	kubetest.Main(m, func(e *kubetest.Env) (err error) {
		env = e
		client, err = kubeclient.New(env.Config)
		return err
	}, goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

const (
	condition = "leader-sidecar.io/leader"
	label     = "leader-sidecar.io/role"
)

func newPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	ns, err := env.Namespace(t.Context(), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	pod, err = env.Client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func start(t *testing.T, pod *corev1.Pod, mode Mode, uid string) *Publisher {
	t.Helper()
	p, err := New(Config{
		Client: client, Namespace: pod.Namespace, Name: pod.Name, UID: uid,
		Mode: mode, ConditionType: condition, LabelKey: label, Identity: "me_1",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// eventually polls the Pod until check accepts it.
func eventually(t *testing.T, pod *corev1.Pod, what string, check func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := env.Client.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if check(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("Pod never showed %s: labels %v, conditions %+v", what, got.Labels, got.Status.Conditions)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func leaderCondition(p *corev1.Pod) *corev1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == condition {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func conditionIs(status corev1.ConditionStatus, message string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		c := leaderCondition(p)
		return c != nil && c.Status == status && c.Message == message
	}
}

func TestPodCondition(t *testing.T) {
	pod := newPod(t, "app-0")
	p := start(t, pod, ModePodCondition, string(pod.UID))
	got := eventually(t, pod, "the condition False", conditionIs(corev1.ConditionFalse, "me_1 does not lead"))
	firstFalse := leaderCondition(got).LastTransitionTime

	time.Sleep(1100 * time.Millisecond) // condition times have one-second resolution
	p.LeadershipChanged(true, 3)
	got = eventually(t, pod, "the condition True", conditionIs(corev1.ConditionTrue, "me_1 leads with fencing token 3"))
	flipped := leaderCondition(got).LastTransitionTime
	if !flipped.After(firstFalse.Time) {
		t.Fatalf("lastTransitionTime %v did not move on the flip from %v", flipped, firstFalse)
	}

	// A new term without a flip updates the message, not the transition time.
	time.Sleep(1100 * time.Millisecond)
	p.LeadershipChanged(true, 4)
	got = eventually(t, pod, "token 4", conditionIs(corev1.ConditionTrue, "me_1 leads with fencing token 4"))
	if c := leaderCondition(got); !c.LastTransitionTime.Equal(&flipped) {
		t.Fatalf("lastTransitionTime moved from %v to %v without a flip", flipped, c.LastTransitionTime)
	}

	p.LeadershipChanged(false, 4)
	eventually(t, pod, "the condition False again", conditionIs(corev1.ConditionFalse, "me_1 does not lead"))
}

func TestPublishingNothingNewPatchesNothing(t *testing.T) {
	pod := newPod(t, "app-0")
	p := start(t, pod, ModePodCondition, string(pod.UID))
	got := eventually(t, pod, "the condition False", conditionIs(corev1.ConditionFalse, "me_1 does not lead"))
	for range 5 {
		p.LeadershipChanged(false, 0)
	}
	p.queue.Add(podKey)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if p.queue.Len() == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	again, err := env.Client.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != got.ResourceVersion {
		t.Fatalf("Pod rewritten (resourceVersion %s -> %s) although nothing changed", got.ResourceVersion, again.ResourceVersion)
	}
}

func TestLabel(t *testing.T) {
	pod := newPod(t, "app-0")
	p := start(t, pod, ModeLabel, string(pod.UID))
	eventually(t, pod, "role follower", func(p *corev1.Pod) bool { return p.Labels[label] == RoleFollower })
	p.LeadershipChanged(true, 1)
	eventually(t, pod, "role leader", func(p *corev1.Pod) bool { return p.Labels[label] == RoleLeader })
	p.LeadershipChanged(false, 1)
	eventually(t, pod, "role follower", func(p *corev1.Pod) bool { return p.Labels[label] == RoleFollower })
}

func TestAnotherPodWithTheSameNameIsNeverTouched(t *testing.T) {
	for _, mode := range []Mode{ModePodCondition, ModeLabel} {
		t.Run(string(mode), func(t *testing.T) {
			pod := newPod(t, "app-0")
			p := start(t, pod, mode, "00000000-0000-0000-0000-000000000000")
			p.LeadershipChanged(true, 1)
			time.Sleep(time.Second)
			got, err := env.Client.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.ResourceVersion != pod.ResourceVersion || got.Labels[label] != "" || leaderCondition(got) != nil {
				t.Fatalf("a Pod with another UID was changed: labels %v, conditions %+v", got.Labels, got.Status.Conditions)
			}
		})
	}
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	base := Config{Client: client, Namespace: "ns", Name: "p", UID: "u", Mode: ModeLabel, LabelKey: label, ConditionType: condition}
	for name, mutate := range map[string]func(*Config){
		"no client":        func(c *Config) { c.Client = nil },
		"no UID":           func(c *Config) { c.UID = "" },
		"no label key":     func(c *Config) { c.LabelKey = "" },
		"no condition":     func(c *Config) { c.Mode, c.ConditionType = ModePodCondition, "" },
		"a mode of no use": func(c *Config) { c.Mode = ModeProbe },
	} {
		c := base
		mutate(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// New accepts exactly the modes that PublishesOnPod, and each of them is
// in Modes: the sidecar checks --readiness-mode against Modes and builds a
// Publisher for the modes that PublishesOnPod.
func TestModesAgreeWithNew(t *testing.T) {
	base := Config{Client: client, Namespace: "ns", Name: "p", UID: "u", LabelKey: label, ConditionType: condition}
	accepted := 0
	for _, mode := range append(slices.Clone(Modes), "", "leader-only") {
		c := base
		c.Mode = mode
		p, err := New(c)
		if (err == nil) != mode.PublishesOnPod() {
			t.Errorf("mode %q: New returned %v, but PublishesOnPod is %v", mode, err, mode.PublishesOnPod())
		}
		if err == nil {
			p.queue.ShutDown() // never Run: end the queue's goroutines
			accepted++
			if !slices.Contains(Modes, mode) {
				t.Errorf("New accepts mode %q, which is not in Modes %q", mode, Modes)
			}
		}
	}
	if accepted == 0 {
		t.Fatal("New accepts none of Modes")
	}
}

func TestDrainReturnsOnceThePodShowsTheLastState(t *testing.T) {
	pod := newPod(t, "app-0")
	p := start(t, pod, ModeLabel, string(pod.UID))
	p.LeadershipChanged(true, 1)
	p.LeadershipChanged(false, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := env.Client.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[label] != RoleFollower {
		t.Fatalf("Drain returned with role %q on the Pod, want %q", got.Labels[label], RoleFollower)
	}
}

func TestDrainGivesUpWithItsContext(t *testing.T) {
	pod := newPod(t, "app-0")
	p := start(t, pod, ModeLabel, "another-uid") // every patch is refused
	p.LeadershipChanged(true, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := p.Drain(ctx); err == nil {
		t.Fatal("Drain reported success although the Pod could not be patched")
	}
}
