//go:build cluster

package cluster

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	_ "modernc.org/sqlite" // registers "sqlite"
)

// TestExampleChartFencesPausedLeader runs the example worker on one SQLite
// file shared by every replica (app.dataVolume, a hostPath on this one
// node): one resource, one guard table. The leader's worker is held after
// it has read its token and before it writes (--hold-file); its sidecar
// and worker are then frozen with SIGSTOP in the node's runtime, another
// replica takes over after the lease and writes with the next token, and
// the frozen Pod is thawed with its write let go. Its write must be
// refused as stale, the shared row must keep the new leader's value, and
// no two Pods may answer /leader/ready at once at any sample.
func TestExampleChartFencesPausedLeader(t *testing.T) {
	// Not parallel: it runs first and alone, as go test runs the tests
	// that do not call t.Parallel before those that do. It wants one
	// takeover, at exactly the next token, with 6 s leases, which
	// renewals starved by Pods starting beside it would break.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	shared, volume := sharedDataVolume(t, ctx, ns)
	args := []string{"--sidecar=$(LEADER_SIDECAR_URL)", "--db=/data/results.db", "--resource=example",
		"--name=$(POD_NAME)", "--hold-file=/data/hold-$(POD_NAME)"}
	install(t, ctx, ns, "--set", "replicaCount=3",
		"--set-json", "app.dataVolume="+volume,
		"--set-json", "app.args="+mustJSON(t, args),
		// Short timings, so the pause outlasts the lease well within the
		// liveness probe's 30 s; a renew deadline of four retry periods,
		// so a loaded node does not starve a leader out of its term.
		"--set", "sidecar.leaseDuration=6s", "--set", "sidecar.renewDeadline=4s", "--set", "sidecar.retryPeriod=1s",
		"--wait", "--timeout", "2m")
	pods := runningPods(t, ctx, ns, 3, true)
	var old struct {
		pod   string
		token int64
	}
	eventually(t, ctx, "exactly one leader, the Lease's holder", func() (bool, string) {
		st, pod, reason := oneLeader(ctx, ns, pods)
		if reason == "" {
			old.pod, old.token = pod, *st.Token
		}
		return reason == "", reason
	})
	var rest []corev1.Pod
	for _, p := range pods {
		if p.Name != old.pod {
			rest = append(rest, p)
			touch(t, filepath.Join(shared, "hold-"+p.Name))
		}
	}
	eventually(t, ctx, "the leader's worker holding a write with its token", func() (bool, string) {
		return workerLogged(ctx, ns, old.pod, event{Event: "about-to-write", Token: old.token}), "not yet"
	})

	sampling, stopSampling := context.WithCancel(ctx)
	s := &sampler{ns: ns, newLeader: make(chan struct{})}
	sampled := make(chan error, 1)
	go func() { sampled <- s.run(sampling) }()

	leaderPod := podNamed(t, pods, old.pod)
	signal(t, ctx, leaderPod, sidecarContainer, "SIGSTOP")
	signal(t, ctx, leaderPod, "app", "SIGSTOP")
	paused := time.Now()

	var next struct {
		pod   string
		token int64
	}
	eventually(t, ctx, "another Pod leading while the old leader is frozen", func() (bool, string) {
		st, pod, reason := oneLeader(ctx, ns, rest)
		if reason == "" {
			next.pod, next.token = pod, *st.Token
		}
		return reason == "", reason
	})
	if next.token != old.token+1 {
		t.Errorf("token %d after %d, want %d", next.token, old.token, old.token+1)
	}
	eventually(t, ctx, "the new leader's write accepted", func() (bool, string) {
		return workerLogged(ctx, ns, next.pod, event{Event: "write", Token: next.token, Accepted: true}), "not yet"
	})

	touch(t, filepath.Join(shared, "hold-"+old.pod))
	signal(t, ctx, leaderPod, sidecarContainer, "SIGCONT")
	signal(t, ctx, leaderPod, "app", "SIGCONT")
	t.Logf("%s (token %d) frozen for %v; %s took over with token %d",
		old.pod, old.token, time.Since(paused).Round(time.Millisecond), next.pod, next.token)
	eventually(t, ctx, "the thawed worker's late write refused as stale", func() (bool, string) {
		return workerLogged(ctx, ns, old.pod, event{Event: "write", Token: old.token, Accepted: false, Stale: true}), "not yet"
	})
	if workerLogged(ctx, ns, old.pod, event{Event: "write", Token: old.token, Accepted: true}) {
		t.Errorf("the frozen leader's write with token %d was accepted", old.token)
	}
	// Keep sampling a little after the thaw: the old sidecar must not claim.
	time.Sleep(3 * time.Second)
	stopSampling()
	if err := <-sampled; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rounds of /leader/ready over every Pod, leaders in turn: %v", s.rounds, s.seen)
	s.twoLeaders(t, "the pause")

	db, err := sql.Open("sqlite", filepath.Join(shared, "results.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var writer string
	var token int64
	if err := db.QueryRowContext(ctx, "SELECT writer, token FROM results WHERE resource = 'example'").Scan(&writer, &token); err != nil {
		t.Fatalf("reading the shared row: %v", err)
	}
	if writer == old.pod || token <= old.token {
		t.Errorf("the shared row was written by %s with token %d, after %s took over with token %d", writer, token, next.pod, next.token)
	}
}

// event is the part of a worker's JSON log line the tests match.
type event struct {
	Event    string `json:"event"`
	Token    int64  `json:"token"`
	Accepted bool   `json:"accepted"`
	Stale    bool   `json:"stale"`
}

// workerLogged reports whether the app container of pod logged want.
func workerLogged(ctx context.Context, ns, pod string, want event) bool {
	out, err := cl.try(ctx, cl.kubectl, "logs", "--namespace", ns, pod, "--container", "app")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(out, "\n") {
		var e event
		if json.Unmarshal([]byte(line), &e) == nil && e == want {
			return true
		}
	}
	return false
}

// signal sends sig to the main process of a container of p, in the node's
// runtime.
func signal(t *testing.T, ctx context.Context, p corev1.Pod, container, sig string) {
	t.Helper()
	id := containerID(t, p, container)
	cmd := exec.CommandContext(ctx, filepath.Join(cl.root, "hack", "cluster.sh"),
		"exec", "ctr", "-n", "k8s.io", "tasks", "kill", "--signal", sig, id)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s to %s of %s: %v: %s", sig, container, p.Name, err, out)
	}
}

// containerID is the runtime's ID of a container of p.
func containerID(t *testing.T, p corev1.Pod, container string) string {
	t.Helper()
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if s.Name == container && s.ContainerID != "" {
			return strings.TrimPrefix(s.ContainerID, "containerd://")
		}
	}
	t.Fatalf("%s: no container ID for %s", p.Name, container)
	return ""
}

func podNamed(t *testing.T, pods []corev1.Pod, name string) corev1.Pod {
	t.Helper()
	for _, p := range pods {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no Pod %s", name)
	return corev1.Pod{}
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sharedDataVolume makes a directory on the node that the app (uid 65532)
// can write, and returns it with the app.dataVolume value that mounts it
// at /data in every Pod: one file there is shared by every replica, as a
// database of the application's would be. A hostPath volume is outside
// every Pod Security profile but privileged, so ns is labelled so; the
// rest of the Pod still meets restricted. The node's mount namespace sees
// the host's /tmp.
func sharedDataVolume(t *testing.T, ctx context.Context, ns string) (dir, volume string) {
	t.Helper()
	cl.run(t, ctx, cl.kubectl, "label", "namespace", ns, "--overwrite", "pod-security.kubernetes.io/enforce=privileged")
	dir, err := os.MkdirTemp("", "leader-sidecar-data-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, mustJSON(t, map[string]any{"hostPath": map[string]string{"path": dir, "type": "Directory"}})
}
