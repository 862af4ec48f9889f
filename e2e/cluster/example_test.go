//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

const (
	release = "demo"
	// The example chart's names for release demo.
	fullName         = "demo-leader-sidecar-example"
	sidecarContainer = "leader-sidecar"
)

// TestExampleChartElectsOneLeader runs the README's commands for the
// example chart as written (the same as docs/kubernetes.md's), in the
// kubeconfig's namespace, default: every Pod runs, the sidecar as a native
// sidecar, no container restarts, exactly one sidecar leads, the Lease's
// holder with the Lease's token, and the README's kubectl command prints
// its identity.
func TestExampleChartElectsOneLeader(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	commands := readmeExampleCommands(t)
	buildChartDeps(t, ctx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = shell(ctx, "helm uninstall --no-hooks --wait --timeout 20s "+release)
	})
	mustShell(t, ctx, commands[1])
	const ns = "default"
	replicas := 2 // the chart's replicaCount
	pods := runningPods(t, ctx, ns, replicas, true)
	for _, p := range pods {
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if s.RestartCount != 0 {
				t.Errorf("%s: container %s restarted %d times", p.Name, s.Name, s.RestartCount)
			}
		}
	}
	var leader fence.LeaderJSON
	eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
		var reason string
		leader, _, reason = oneLeader(ctx, ns, pods)
		return reason == "", reason
	})
	if got := mustShell(t, ctx, commands[2]); got != leader.Identity {
		t.Errorf("%s printed %q, want the leader's identity %q", commands[2], got, leader.Identity)
	}
}

// readmeExampleCommands are the README's three commands for the example
// chart: build its dependencies, install it, print the Lease's holder.
func readmeExampleCommands(t testing.TB) []string {
	t.Helper()
	_, section := cut(t, readFile(t, filepath.Join(cl.root, "README.md")), "### The example chart")
	_, section = cut(t, section, "```sh\n")
	block, _ := cut(t, section, "```")
	if manual := readFile(t, filepath.Join(cl.root, "docs", "kubernetes.md")); !strings.Contains(manual, "```sh\n"+block+"```") {
		t.Fatalf("docs/kubernetes.md does not show the README's commands for the example chart:\n%s", block)
	}
	commands := strings.Split(strings.TrimSpace(block), "\n")
	if len(commands) != 3 || !strings.HasPrefix(commands[0], "helm dependency build ") ||
		!strings.HasPrefix(commands[1], "helm install "+release+" ") || !strings.HasPrefix(commands[2], "kubectl get lease "+fullName+" ") {
		t.Fatalf("the README's example chart commands are %q, want helm dependency build, helm install %s, kubectl get lease %s", commands, release, fullName)
	}
	return commands
}

// TestExampleChartFailoverOnDelete deletes the leader's Pod: its sidecar
// releases the Lease on the way out (the app has stopped first), so another
// Pod's sidecar leads with the next token, without waiting for the lease to
// run out. The Lease's own history shows it, not a wall-clock bound (which
// load on the node would stretch): a watch from before the delete sees the
// old holder's records, then a released one (no holder), then the new
// holder's.
func TestExampleChartFailoverOnDelete(t *testing.T) {
	// Not parallel: it runs first, alone, so that the kubelet stops the
	// leader's Pod without other Pods starting and stopping beside it.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	pods, leader, leaderPod := installExampleWithLeader(t, ctx, ns)

	history := watchLease(t, ctx, ns, fullName)

	start := time.Now()
	cl.run(t, ctx, cl.kubectl, "delete", "pod", "--namespace", ns, "--wait=false", leaderPod)
	var rest []corev1.Pod
	for _, p := range pods {
		if p.Name != leaderPod {
			rest = append(rest, p)
		}
	}
	var next fence.LeaderJSON
	eventually(t, ctx, "another Pod leads after the leader's Pod was deleted", func() (bool, string) {
		var reason string
		next, _, reason = oneLeader(ctx, ns, rest)
		return reason == "", reason
	})
	t.Logf("%s led with token %d; %s leads with token %d after %v",
		leader.Identity, *leader.Token, next.Identity, *next.Token, time.Since(start).Round(time.Millisecond))
	if *next.Token != *leader.Token+1 {
		t.Errorf("token %d after %d, want %d", *next.Token, *leader.Token, *leader.Token+1)
	}

	history.checkLetGoThenAcquired(t, ctx, leader.Identity, next.Identity)
}

// installExampleWithLeader installs the example chart with 3 replicas and
// waits until exactly one Pod leads, the Lease's holder.
func installExampleWithLeader(t *testing.T, ctx context.Context, ns string) (pods []corev1.Pod, leader fence.LeaderJSON, leaderPod string) {
	t.Helper()
	pods = installExample(t, ctx, ns, 3)
	eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
		var reason string
		leader, leaderPod, reason = oneLeader(ctx, ns, pods)
		return reason == "", reason
	})
	return pods, leader, leaderPod
}

// installExample installs the example chart into ns with its defaults and
// replicas Pods, and returns the Pods once every one runs with every
// container ready.
func installExample(t *testing.T, ctx context.Context, ns string, replicas int) []corev1.Pod {
	t.Helper()
	install(t, ctx, ns, "--set", fmt.Sprintf("replicaCount=%d", replicas), "--wait", "--timeout", "2m")
	return runningPods(t, ctx, ns, replicas, true)
}

// install installs the example chart into ns as release demo, with args.
func install(t testing.TB, ctx context.Context, ns string, args ...string) {
	t.Helper()
	buildChartDeps(t, ctx)
	chart := filepath.Join(cl.root, "charts", "leader-sidecar-example")
	cl.run(t, ctx, cl.helm, append([]string{"install", release, chart, "--namespace", ns}, args...)...)
}

// chartDeps builds the example chart's dependencies once, by the README's
// command: tests that run in parallel must not rewrite its charts/
// directory under each other.
var chartDeps sync.Once

func buildChartDeps(t testing.TB, ctx context.Context) {
	t.Helper()
	chartDeps.Do(func() { mustShell(t, ctx, readmeExampleCommands(t)[0]) })
}

// runningPods waits until ns has replicas Pods of release demo, each
// running every container (and with ready, each container ready), and
// returns them.
func runningPods(t testing.TB, ctx context.Context, ns string, replicas int, ready bool) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, ctx, fmt.Sprintf("%d Pods running (ready: %v)", replicas, ready), func() (bool, string) {
		list, err := cl.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/instance=" + release,
		})
		if err != nil {
			return false, err.Error()
		}
		pods = list.Items
		if len(pods) != replicas {
			return false, fmt.Sprintf("%d Pods", len(pods))
		}
		for _, p := range pods {
			if msg := notRunning(p, ready); msg != "" {
				return false, p.Name + ": " + msg
			}
		}
		return true, ""
	})
	return pods
}

// oneLeader asks every Pod's sidecar for /leader and returns the one
// leader's state and Pod, or why there is not exactly one leader that is
// the Lease's holder with the Lease's token.
func oneLeader(ctx context.Context, ns string, pods []corev1.Pod) (fence.LeaderJSON, string, string) {
	return oneLeaderOf(ctx, ns, fullName, pods)
}

// oneLeaderOf is oneLeader for the election of Lease leaseName.
func oneLeaderOf(ctx context.Context, ns, leaseName string, pods []corev1.Pod) (fence.LeaderJSON, string, string) {
	lease, err := cl.client.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		return fence.LeaderJSON{}, "", err.Error()
	}
	var leaders []fence.LeaderJSON
	var pod string
	for _, p := range pods {
		st, err := leaderState(ctx, ns, p.Name)
		if err != nil {
			return fence.LeaderJSON{}, "", err.Error()
		}
		if st.Leader {
			leaders, pod = append(leaders, st), p.Name
		}
	}
	switch {
	case len(leaders) != 1:
		return fence.LeaderJSON{}, "", fmt.Sprintf("%d sidecars answer leader: true", len(leaders))
	case lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != leaders[0].Identity:
		return fence.LeaderJSON{}, "", fmt.Sprintf("the leader is %s, the Lease's holder %q", leaders[0].Identity, ptr.Deref(lease.Spec.HolderIdentity, ""))
	case leaders[0].Token == nil || lease.Spec.LeaseTransitions == nil ||
		*leaders[0].Token != int64(*lease.Spec.LeaseTransitions):
		return fence.LeaderJSON{}, "", fmt.Sprintf("the leader's token %v, the Lease's transitions %v", leaders[0].Token, lease.Spec.LeaseTransitions)
	}
	return leaders[0], pod, ""
}

// notRunning says why a Pod is not running every container (and with
// ready, every container ready) with its sidecar a native one (an init
// container that keeps running), or "".
func notRunning(p corev1.Pod, ready bool) string {
	if p.Status.Phase != corev1.PodRunning {
		return "phase " + string(p.Status.Phase)
	}
	native := false
	for _, c := range p.Spec.InitContainers {
		if c.Name == sidecarContainer && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			native = true
		}
	}
	if !native {
		return "no native sidecar " + sidecarContainer
	}
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if s.State.Running == nil || ready && !s.Ready {
			return "container " + s.Name + " not running (or not ready)"
		}
	}
	return ""
}

// leaderState asks the sidecar of a Pod for GET /leader on its loopback
// listener, from inside its container (the image has no shell or curl:
// the sidecar's own probe subcommand prints the body).
func leaderState(ctx context.Context, ns, pod string) (fence.LeaderJSON, error) {
	var st fence.LeaderJSON
	// An exec that hangs (its stream never set up or never closed) must
	// not take the caller's whole deadline: the next poll asks again.
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := cl.try(ctx, cl.kubectl, "exec", "--namespace", ns, pod, "--container", sidecarContainer, "--",
		"/sidecar", "probe", "--address", "127.0.0.1:4040", "/leader")
	if err != nil {
		return st, fmt.Errorf("%s: %w", pod, err)
	}
	i := strings.Index(out, "{")
	if i < 0 {
		return st, fmt.Errorf("%s: no JSON in %q", pod, out)
	}
	if err := json.Unmarshal([]byte(out[i:]), &st); err != nil {
		return st, fmt.Errorf("%s: %w in %q", pod, err, out)
	}
	return st, nil
}

// leaseWatch follows one Lease's records from the version it had when the
// watch began.
type leaseWatch struct {
	name string
	w    watch.Interface
}

// watchLease watches Lease name in ns from its version now; the watch
// ends with the test.
func watchLease(t *testing.T, ctx context.Context, ns, name string) *leaseWatch {
	t.Helper()
	before, err := cl.client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cl.client.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   "metadata.name=" + name,
		ResourceVersion: before.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return &leaseWatch{name: name, w: w}
}

// checkLetGoThenAcquired reads the Lease's records since the watch began
// until the first that names next, and fails t unless old let go of it
// and next took it without waiting out old's lease: its holders in turn
// were old (renewing), none (old released it) and next; or old and next
// directly (old handed it off as it stopped), next's first record
// arriving sooner after old's last than the renew deadline (10s), where
// a takeover after an expiry comes a lease (15s) after it.
func (lw *leaseWatch) checkLetGoThenAcquired(t *testing.T, ctx context.Context, old, next string) {
	t.Helper()
	var holders []string
	var oldLast, nextFirst time.Time
	for len(holders) == 0 || holders[len(holders)-1] != next {
		select {
		case ev, ok := <-lw.w.ResultChan():
			if !ok {
				t.Fatalf("the watch of Lease %s ended after records held by %q", lw.name, holders)
			}
			l, isLease := ev.Object.(*coordinationv1.Lease)
			if !isLease {
				t.Fatalf("the watch of Lease %s: %s event of %T", lw.name, ev.Type, ev.Object)
			}
			h := ""
			if l.Spec.HolderIdentity != nil {
				h = *l.Spec.HolderIdentity
			}
			switch h {
			case old:
				oldLast = time.Now()
			case next:
				nextFirst = time.Now()
			}
			if len(holders) == 0 || holders[len(holders)-1] != h {
				holders = append(holders, h)
			}
		case <-ctx.Done():
			t.Fatalf("the watch of Lease %s never showed %s holding it; holders in turn: %q", lw.name, next, holders)
		}
	}
	t.Logf("Lease %s's holders in turn since the watch began: %q", lw.name, holders)
	released := []string{old, "", next}
	switch {
	case slices.Equal(holders, released), slices.Equal(holders, released[1:]):
	case slices.Equal(holders, []string{old, next}) && nextFirst.Sub(oldLast) < 10*time.Second:
		t.Logf("%s handed the Lease to %s %v after its last renewal", old, next, nextFirst.Sub(oldLast).Round(time.Millisecond))
	default:
		t.Errorf("Lease %s's holders in turn: %q (%s's first record %v after %s's last), want %s letting go of it (a release, or a hand-off sooner than the renew deadline), then %s acquiring it",
			lw.name, holders, next, nextFirst.Sub(oldLast).Round(time.Millisecond), old, old, next)
	}
}
