//go:build cluster

package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/injecttest"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// The injector (charts/leader-sidecar-injector) on the cluster: installed
// once, by the first command of docs/injection.md's "Add leadership to an
// existing Deployment", run as the page shows it; every test here runs in
// parallel with the others.

const (
	injectorNamespace = "leader-sidecar-injector"
	// injectSoak is how long the injected Deployment is watched for
	// container restarts and a second leader: eight lease durations, twelve
	// liveness periods.
	injectSoak = 2 * time.Minute
)

var (
	injectorOnce sync.Once
	injectorErr  error
)

// injector installs the injector (once per test binary) and waits until
// its policy injects a dry-run Pod, logging how long that took.
func injector(t *testing.T) {
	t.Helper()
	injectorOnce.Do(func() { injectorErr = installInjector() })
	if injectorErr != nil {
		t.Fatalf("installing the injector: %v", injectorErr)
	}
}

func installInjector() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The v1 policy API is served (GA in Kubernetes 1.36).
	res, err := cl.client.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		return err
	}
	for _, want := range []string{"mutatingadmissionpolicies", "mutatingadmissionpolicybindings",
		"validatingadmissionpolicies", "validatingadmissionpolicybindings"} {
		if !slices.ContainsFunc(res.APIResources, func(r metav1.APIResource) bool { return r.Name == want }) {
			return fmt.Errorf("the API server does not serve admissionregistration.k8s.io/v1 %s", want)
		}
	}
	steps, err := injectionSteps()
	if err != nil {
		return err
	}
	// A cluster kept from an earlier run has the release already.
	if _, err := cl.try(ctx, cl.helm, "status", "--namespace", injectorNamespace, "leader-sidecar-injector"); err == nil {
		if _, err := cl.try(ctx, cl.helm, "uninstall", "--namespace", injectorNamespace, "--wait", "leader-sidecar-injector"); err != nil {
			return err
		}
	}
	start := time.Now()
	if out, err := shell(ctx, steps[0]); err != nil {
		return fmt.Errorf("%s: %w\n%s", steps[0], err, out)
	}
	installed := time.Now()
	// Policies take a moment to become active: dry-run a labelled Pod in
	// the namespace default until it comes back injected (on the sqlite
	// backend, which needs no RBAC the namespace lacks).
	probe := injecttest.LabelledPod("probe")
	probe.Spec.ServiceAccountName = "default"
	probe.Annotations["leader-sidecar.io/backend"] = "sqlite"
	tries := 0
	for {
		tries++
		got, err := injecttest.DryRun(cl.client)(ctx, "default", probe)
		if err == nil && injecttest.ContainerNamed(got.Spec.InitContainers, injecttest.SidecarName) != nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no injection %v after helm install (last: %v)", time.Since(installed), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	fmt.Fprintf(os.Stderr, "e2e/cluster: helm install of the injector took %v; its policy injected %v later (%d dry runs)\n",
		installed.Sub(start).Round(time.Millisecond), time.Since(installed).Round(time.Millisecond), tries)
	return nil
}

// injectionSteps are the shell blocks of docs/injection.md's "Add
// leadership to an existing Deployment", in order: install the injector,
// prepare the namespace, label the Pod template.
func injectionSteps() ([]string, error) {
	doc, err := os.ReadFile(filepath.Join(cl.root, "docs", "injection.md"))
	if err != nil {
		return nil, err
	}
	_, section, ok := strings.Cut(string(doc), "\n## Add leadership to an existing Deployment\n")
	if !ok {
		return nil, errors.New(`docs/injection.md has no "## Add leadership to an existing Deployment"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var steps []string
	for {
		_, rest, ok := strings.Cut(section, "```sh\n")
		if !ok {
			break
		}
		block, after, _ := strings.Cut(rest, "```")
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(block, " \n"), "\n") {
			lines = append(lines, strings.TrimPrefix(l, "   ")) // a list item's indent
		}
		steps, section = append(steps, strings.Join(lines, "\n")), after
	}
	if len(steps) != 3 {
		return nil, fmt.Errorf("docs/injection.md shows %d commands to add leadership to a Deployment, want 3", len(steps))
	}
	return steps, nil
}

// shell runs script with bash, in the repository, with the cluster's
// kubeconfig and the repository's kubectl and helm first in PATH, as a
// user who follows the docs would.
func shell(ctx context.Context, script string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = cl.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cl.kubeconfig,
		"PATH="+filepath.Dir(cl.kubectl)+":"+filepath.Dir(cl.helm)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustShell is shell that fails t.
func mustShell(t testing.TB, ctx context.Context, script string) string {
	t.Helper()
	out, err := shell(ctx, script)
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return out
}

// apply creates the objects of manifest (YAML) with kubectl apply.
func apply(t *testing.T, ctx context.Context, manifest string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, cl.kubectl, "apply", "-f", "-")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cl.kubeconfig)
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s\n%s", err, out, manifest)
	}
}

// prepareNamespace is step 2 for a namespace of a test, without changing
// the release the tests share: the injector chart's Role and RoleBinding
// for serviceAccount and lease (its namespaces values, rendered alone),
// applied with the ServiceAccount.
func prepareNamespace(t *testing.T, ctx context.Context, ns, serviceAccount, lease string, set ...string) {
	t.Helper()
	rbac := cl.run(t, ctx, cl.helm, append([]string{"template", "leader-sidecar-injector", "charts/leader-sidecar-injector",
		"--namespace", injectorNamespace, "--show-only", "templates/namespaces.yaml",
		"--set", fmt.Sprintf("namespaces[0].namespace=%s,namespaces[0].serviceAccount=%s,namespaces[0].lease=%s", ns, serviceAccount, lease)},
		set...)...)
	apply(t, ctx, fmt.Sprintf("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: %s, namespace: %s}\n---\n%s", serviceAccount, ns, rbac))
	// The authorizer learns of RBAC objects from a watch, and admission
	// asks it: wait until it allows the Lease.
	eventually(t, ctx, "the namespace's Role in effect", func() (bool, string) {
		allowed, reason, err := injecttest.LeaseUpdateAllowed(ctx, cl.client, ns, serviceAccount, lease)
		if err != nil {
			return false, err.Error()
		}
		return allowed, reason
	})
}

// images are the sidecar's and the example app's image references, as
// hack/cluster-images.sh imports them.
func images(t *testing.T) (sidecar, app string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(cl.root, "hack", "chart-images.sh")).Output()
	if err != nil {
		t.Fatalf("hack/chart-images.sh: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, ref, _ := strings.Cut(line, " ")
		switch name {
		case "sidecar":
			sidecar = ref
		case "app":
			app = ref
		}
	}
	if sidecar == "" || app == "" {
		t.Fatalf("hack/chart-images.sh printed %q", out)
	}
	return sidecar, app
}

// workerDeployment is a plain Deployment of the example worker (image %s)
// named orders, with replicas %d and automountServiceAccountToken %v; the
// Pod template has the opt-in label and the Lease annotation when %s is
// the labels' and annotations' extra text.
const workerDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: orders
  namespace: %s
spec:
  replicas: %d
  selector:
    matchLabels: {app.kubernetes.io/name: orders}
  template:
    metadata:
      labels: {app.kubernetes.io/name: orders%s}
    spec:
      serviceAccountName: orders
      automountServiceAccountToken: %v
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: app
          image: %s
          imagePullPolicy: IfNotPresent
          args: [--sidecar=http://127.0.0.1:4040, "--db=file:results?mode=memory&cache=shared", --resource=orders]
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
`

// optedIn is the Pod template metadata that opts in: the label, and the
// annotation that names the Lease.
const optedIn = `, leader-sidecar.io/inject: "true"}
      annotations: {leader-sidecar.io/lease: orders`

// injectedPods waits until ns has replicas Pods matching selector, none
// terminating, each running every container ready with exactly one
// sidecar (native, injected: the marker annotation) that mounts its own
// token, and each accepted by extra (nil: any); it returns them.
func injectedPods(t *testing.T, ctx context.Context, ns, selector string, replicas int, extra func(corev1.Pod) string) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, ctx, fmt.Sprintf("%d injected Pods running", replicas), func() (bool, string) {
		list, err := cl.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				pods = append(pods, p)
			}
		}
		if len(pods) != replicas {
			return false, fmt.Sprintf("%d Pods", len(pods))
		}
		for _, p := range pods {
			if msg := notInjected(p); msg != "" {
				return false, p.Name + ": " + msg
			}
			if msg := notRunning(p, true); msg != "" {
				return false, p.Name + ": " + msg
			}
			if extra != nil {
				if msg := extra(p); msg != "" {
					return false, p.Name + ": " + msg
				}
			}
		}
		return true, ""
	})
	return pods
}

// notInjected says why p is not a Pod injected once, with the sidecar's
// own token, or "".
func notInjected(p corev1.Pod) string {
	n := 0
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		if c.Name == sidecarContainer {
			n++
		}
	}
	sc := injecttest.ContainerNamed(p.Spec.InitContainers, sidecarContainer)
	switch {
	case n != 1:
		return fmt.Sprintf("%d %s containers", n, sidecarContainer)
	case p.Annotations[injecttest.MarkerAnnotation] != "true":
		return "no marker annotation"
	case !slices.Equal(injecttest.TokenMounts(*sc), []string{"leader-sidecar-token"}):
		return fmt.Sprintf("the sidecar mounts %v as its token", injecttest.TokenMounts(*sc))
	}
	return ""
}

// TestInjectorAdmission sends Pods through admission on the cluster, by
// server-side dry run, with every admission plugin of a real API server
// (the ServiceAccount plugin with real ServiceAccounts, Pod Security
// "restricted"): the shape checks e2e/inject runs on envtest
// (internal/injecttest); a Pod that automounts its ServiceAccount token
// gets it in its app container only, the sidecar mounting its own; and a
// broken parameter (a namespace's own, without the image key) refuses
// only the opted-in Pods, with the ValidatingAdmissionPolicy's message.
func TestInjectorAdmission(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	injector(t)
	ns := cl.namespace(t)
	where := injecttest.Where{Admit: injecttest.DryRun(cl.client), Namespace: ns,
		Excluded: []string{injectorNamespace, "kube-system"}}
	// The shapes take every readiness mode: pod-condition's rights, and the
	// deletion cost's (the label's).
	prepareNamespace(t, ctx, ns, injecttest.ServiceAccount, "orders", "--set", "namespaces[0].readinessMode=pod-condition")
	for _, n := range where.Excluded {
		serviceAccount(t, ctx, n, injecttest.ServiceAccount)
	}
	// The docs' command that shows whether the cluster serves the API.
	doc := readFile(t, filepath.Join(cl.root, "docs", "injection.md"))
	_, after := cut(t, doc, "To see whether a cluster serves the API:\n\n```sh\n")
	served, _ := cut(t, after, "```")
	if out := mustShell(t, ctx, served); !strings.Contains(out, "mutatingadmissionpolicies") {
		t.Errorf("%s printed %q", served, out)
	}
	for _, c := range injecttest.Shapes {
		t.Run(c.Name, func(t *testing.T) { c.Check(t, where) })
	}

	t.Run("automount", func(t *testing.T) {
		pod := injecttest.LabelledPod("orders-0")
		pod.Spec.AutomountServiceAccountToken = nil
		got := where.MustAdmit(t, ns, pod)
		sc := injecttest.ContainerNamed(got.Spec.InitContainers, sidecarContainer)
		if sc == nil {
			t.Fatalf("not injected: %v", injecttest.InitNames(got))
		}
		app := injecttest.TokenMounts(got.Spec.Containers[0])
		if m := injecttest.TokenMounts(*sc); !slices.Equal(m, []string{"leader-sidecar-token"}) {
			t.Errorf("the sidecar mounts %v at %s, want its own token alone", m, injecttest.TokenPath)
		}
		if len(app) != 1 || !strings.HasPrefix(app[0], "kube-api-access-") {
			t.Errorf("the app container mounts %v at %s, want the ServiceAccount plugin's kube-api-access volume", app, injecttest.TokenPath)
		}
	})

	t.Run("broken-parameter", func(t *testing.T) {
		broken := cl.namespace(t)
		serviceAccount(t, ctx, broken, injecttest.ServiceAccount)
		param, err := cl.client.CoreV1().ConfigMaps(injectorNamespace).Get(ctx, "leader-sidecar-injector", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		delete(param.Data, "image")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "leader-sidecar-injector"}, Data: param.Data}
		if _, err := cl.client.CoreV1().ConfigMaps(broken).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cl.run(t, ctx, cl.kubectl, "label", "namespace", broken, "leader-sidecar.io/settings=namespace")
		// The policies see a new parameter after a moment: create (not a
		// dry run) until refused.
		var refusal error
		eventually(t, ctx, "an opted-in Pod refused for the missing image", func() (bool, string) {
			p, err := cl.client.CoreV1().Pods(broken).Create(ctx, injecttest.LabelledPod("orders-0"), metav1.CreateOptions{})
			if err == nil {
				_ = cl.client.CoreV1().Pods(broken).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
				return false, "admitted with init containers " + strings.Join(injecttest.InitNames(p), ",")
			}
			refusal = err
			return strings.Contains(err.Error(), `has no key "image"`), err.Error()
		})
		t.Logf("refused: %v", refusal)
		if msg := refusal.Error(); !strings.Contains(msg, "ValidatingAdmissionPolicy 'leader-sidecar-injector'") ||
			!strings.Contains(msg, broken+"/leader-sidecar-injector") {
			t.Errorf("refusal %q, want the ValidatingAdmissionPolicy's, naming ConfigMap %s/leader-sidecar-injector", msg, broken)
		}
		pod := injecttest.LabelledPod("other")
		delete(pod.Labels, injecttest.InjectLabel)
		got, err := cl.client.CoreV1().Pods(broken).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("an unlabelled Pod in the namespace of the broken parameter: %v", err)
		}
		if len(got.Spec.InitContainers) != 0 {
			t.Errorf("an unlabelled Pod was injected: %v", injecttest.InitNames(got))
		}
	})
}

// serviceAccount creates the ServiceAccount name in ns, unless it exists.
func serviceAccount(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cl.client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestInjectorPlainDeployment applies a Deployment written as plain YAML
// (no Helm) whose Pod template has only the opt-in label and the Lease
// annotation, with automountServiceAccountToken false, in a namespace
// that enforces Pod Security "restricted", prepared with the injector
// chart's Role: three Pods run injected, with no container restart over
// injectSoak; exactly one sidecar leads, the Lease's holder (so the
// sidecar reaches the API server with its own token) while no app
// container has a token. Deleting the leader's Pod makes another lead
// with the next token, once the old sidecar has released the Lease (its
// records show no holder between the two).
func TestInjectorPlainDeployment(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute+injectSoak)
	defer cancel()
	injector(t)
	ns := cl.namespace(t)
	_, app := images(t)
	prepareNamespace(t, ctx, ns, "orders", "orders")
	apply(t, ctx, fmt.Sprintf(workerDeployment, ns, 3, optedIn, false, app))
	noAppToken := func(p corev1.Pod) string {
		for _, c := range p.Spec.Containers {
			if m := injecttest.TokenMounts(c); len(m) != 0 {
				return fmt.Sprintf("container %s mounts %v", c.Name, m)
			}
		}
		return ""
	}
	pods := injectedPods(t, ctx, ns, "app.kubernetes.io/name=orders", 3, noAppToken)
	var leader, leaderPod string
	var first fence.LeaderJSON
	eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
		var reason string
		first, leaderPod, reason = oneLeaderOf(ctx, ns, "orders", pods)
		return reason == "", reason
	})
	t.Logf("3 injected Pods running, %s leads; watching them for %v", leaderPod, injectSoak)
	sweeps, unreachable := 0, 0
	for end := time.Now().Add(injectSoak); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		st, _, reason := oneLeaderOf(ctx, ns, "orders", pods)
		switch {
		case strings.Contains(reason, "answer leader: true"), reason == "" && (st.Identity != first.Identity || *st.Token != *first.Token):
			t.Errorf("during the soak: %s (leader %s token %v; first %s token %v)", reason, st.Identity, st.Token, first.Identity, first.Token)
		case reason != "":
			unreachable++ // a request that failed: that sweep saw nothing
		default:
			sweeps++
		}
	}
	t.Logf("%d sweeps of every Pod and the Lease, each with exactly %s leading at token %d; %d sweeps with a failed request", sweeps, first.Identity, *first.Token, unreachable)
	if sweeps == 0 {
		t.Fatal("no sweep answered during the soak")
	}
	after := injectedPods(t, ctx, ns, "app.kubernetes.io/name=orders", 3, noAppToken)
	for i, p := range after {
		if p.Name != pods[i].Name {
			t.Errorf("Pod %s replaced by %s", pods[i].Name, p.Name)
		}
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if s.RestartCount != 0 {
				t.Errorf("%s: container %s restarted %d times", p.Name, s.Name, s.RestartCount)
			}
		}
	}
	var token int64
	eventually(t, ctx, "exactly one leader after the soak, the Lease's holder", func() (bool, string) {
		st, pod, reason := oneLeaderOf(ctx, ns, "orders", after)
		if reason == "" {
			leader, leaderPod, token = st.Identity, pod, *st.Token
		}
		return reason == "", reason
	})

	history := watchLease(t, ctx, ns, "orders")
	start := time.Now()
	cl.run(t, ctx, cl.kubectl, "delete", "pod", "--namespace", ns, "--wait=false", leaderPod)
	var rest []corev1.Pod
	for _, p := range after {
		if p.Name != leaderPod {
			rest = append(rest, p)
		}
	}
	var next fence.LeaderJSON
	eventually(t, ctx, "another Pod leads after the leader's Pod was deleted", func() (bool, string) {
		var reason string
		next, _, reason = oneLeaderOf(ctx, ns, "orders", rest)
		return reason == "", reason
	})
	t.Logf("%s led with token %d; %s leads with token %d after %v",
		leader, token, next.Identity, *next.Token, time.Since(start).Round(time.Millisecond))
	if *next.Token != token+1 {
		t.Errorf("token %d after %d, want %d", *next.Token, token, token+1)
	}
	// The injected sidecar released the Lease as its Pod stopped: the next
	// leader took it over from no holder, not after the lease expired.
	history.checkLetGoThenAcquired(t, ctx, leader, next.Identity)
}

// TestInjectorReadmeCommands follows docs/injection.md's "Add leadership
// to an existing Deployment" (the README shows its last command): in
// namespace shop, enforcing Pod Security "restricted", a Deployment
// orders of the example worker, as the namespace's default ServiceAccount
// with the token automounted, without the sidecar; then the page's three
// commands, run as written (the first by the shared install), which create
// the ServiceAccount orders and name it. The Deployment rolls out two
// injected Pods that run as orders, one of which leads; each app container
// keeps the ServiceAccount token it asked for, the sidecar mounts its own. Then a
// template change (kubectl rollout restart) rolls out new Pods, each
// injected once.
func TestInjectorReadmeCommands(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	steps, err := injectionSteps()
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(readFile(t, filepath.Join(cl.root, "README.md"))), " ")
	if !strings.Contains(readme, strings.Join(strings.Fields(steps[2]), " ")) {
		t.Errorf("the README does not show the command of docs/injection.md:\n%s", steps[2])
	}
	injector(t)
	const ns = "shop"
	namespaceNamed(t, ns)
	_, app := images(t)
	// The Deployment as a user has it: no ServiceAccount of its own (the
	// namespace's default); the steps create one and name it.
	asDefault := strings.Replace(fmt.Sprintf(workerDeployment, ns, 2, "", true, app), "      serviceAccountName: orders\n", "", 1)
	if strings.Contains(asDefault, "serviceAccountName") {
		t.Fatal("the Deployment still names a ServiceAccount")
	}
	apply(t, ctx, asDefault)
	for _, step := range steps[1:] {
		t.Logf("$ %s\n%s", step, mustShell(t, ctx, step))
	}

	appToken := func(p corev1.Pod) string {
		if p.Spec.ServiceAccountName != "orders" {
			return fmt.Sprintf("runs as %q, want the ServiceAccount orders", p.Spec.ServiceAccountName)
		}
		m := injecttest.TokenMounts(p.Spec.Containers[0])
		if len(m) != 1 || !strings.HasPrefix(m[0], "kube-api-access-") {
			return fmt.Sprintf("the app mounts %v, want the ServiceAccount's token", m)
		}
		return ""
	}
	pods := injectedPods(t, ctx, ns, "app.kubernetes.io/name=orders", 2, appToken)
	eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
		_, _, reason := oneLeaderOf(ctx, ns, "orders", pods)
		return reason == "", reason
	})

	cl.run(t, ctx, cl.kubectl, "rollout", "restart", "deployment", "--namespace", ns, "orders")
	restarted := func(p corev1.Pod) string {
		if p.Annotations["kubectl.kubernetes.io/restartedAt"] == "" {
			return "of the template before the change"
		}
		return appToken(p)
	}
	pods = injectedPods(t, ctx, ns, "app.kubernetes.io/name=orders", 2, restarted)
	eventually(t, ctx, "exactly one leader after the rollout, the Lease's holder", func() (bool, string) {
		_, _, reason := oneLeaderOf(ctx, ns, "orders", pods)
		return reason == "", reason
	})
}

// namespaceNamed creates namespace name, enforcing Pod Security
// "restricted", and deletes it afterwards.
func namespaceNamed(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cl.client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
}

// TestInjectorJobWaitsForLeadership runs a Job of two Pods at once whose
// template opts in with wait-for-leadership: each Pod's job (the sidecar's
// image asking its sidecar for /leader) runs only while its sidecar holds
// the Lease, one after the other, with tokens t and t+1.
func TestInjectorJobWaitsForLeadership(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	injector(t)
	ns := cl.namespace(t)
	sidecar, _ := images(t)
	prepareNamespace(t, ctx, ns, "batch", "nightly")
	apply(t, ctx, fmt.Sprintf(nightlyJob, ns, sidecar))
	list := awaitJobPods(t, ctx, ns, "nightly", 2)
	for _, p := range list {
		if msg := notInjected(p); msg != "" {
			t.Fatalf("%s: %s", p.Name, msg)
		}
	}
	oneRunAfterAnother(t, ctx, ns, list)
}

// nightlyJob (namespace, the sidecar's image) is a plain Job of two Pods
// at once, each of which prints its sidecar's /leader and exits.
const nightlyJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: nightly
  namespace: %s
spec:
  parallelism: 2
  completions: 2
  backoffLimit: 0
  template:
    metadata:
      labels: {leader-sidecar.io/inject: "true"}
      annotations: {leader-sidecar.io/lease: nightly, leader-sidecar.io/wait-for-leadership: "true"}
    spec:
      restartPolicy: Never
      serviceAccountName: batch
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: job
          image: %s
          imagePullPolicy: IfNotPresent
          command: [/sidecar, probe, --address, "127.0.0.1:4040", /leader]
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
`
