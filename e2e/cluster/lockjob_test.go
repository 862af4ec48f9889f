//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLockJobAsEntrypoint runs a Job of two Pods at once whose container's
// command is sidecar lock -- CMD, so the lock is the container's PID 1 (the
// Job and CronJob case of docs/lock.md), on the Lease backend of the
// cluster: each Pod's CMD runs (it prints the version), one term after the
// other with tokens t and t+1, each Pod succeeds with CMD's exit status,
// and no CMD starts before the other has exited and released.
func TestLockJobAsEntrypoint(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	sidecar, _ := images(t)
	prepareNamespace(t, ctx, ns, "batch", "nightly")
	apply(t, ctx, fmt.Sprintf(lockJob, ns, sidecar))
	pods := awaitJobPods(t, ctx, ns, "nightly", 2)
	type run struct {
		pod            string
		started, ended time.Time
		token          string
	}
	var runs []run
	for _, p := range pods {
		logs := cl.run(t, ctx, cl.kubectl, "logs", "--namespace", ns, p.Name, "--container", "job")
		if !strings.Contains(logs, "\nsidecar ") && !strings.HasPrefix(logs, "sidecar ") {
			t.Errorf("%s: CMD (sidecar version) printed nothing:\n%s", p.Name, logs)
		}
		r := run{pod: p.Name,
			started: firstLogged(t, ctx, ns, p.Name, "job", "leading: running the command"),
			ended:   firstLogged(t, ctx, ns, p.Name, "job", "the command exited; releasing the lease"),
		}
		_, after, _ := strings.Cut(logs, `running the command" token=`)
		r.token, _, _ = strings.Cut(after, " ")
		runs = append(runs, r)
	}
	if runs[1].started.Before(runs[0].started) {
		runs[0], runs[1] = runs[1], runs[0]
	}
	t.Logf("%s ran CMD with token %s from %s to %s; %s with token %s from %s", runs[0].pod, runs[0].token,
		runs[0].started.Format(time.RFC3339Nano), runs[0].ended.Format(time.RFC3339Nano),
		runs[1].pod, runs[1].token, runs[1].started.Format(time.RFC3339Nano))
	switch {
	case runs[0].token == "" || runs[0].token == runs[1].token:
		t.Errorf("the two runs had tokens %q and %q, want two different", runs[0].token, runs[1].token)
	case !runs[1].started.After(runs[0].ended):
		t.Errorf("%s ran CMD from %v, before %s's CMD exited and released at %v", runs[1].pod, runs[1].started, runs[0].pod, runs[0].ended)
	}
}

// lockJob (namespace, the sidecar's image) is a Job of two Pods at once
// whose container runs sidecar lock as its entrypoint, with the sidecar's
// own version command as CMD.
const lockJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: nightly
  namespace: %s
spec:
  parallelism: 2
  completions: 2
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      serviceAccountName: batch
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: job
          image: %s
          imagePullPolicy: IfNotPresent
          command: [/sidecar, lock, --verbose, --lease-name, nightly, --, /sidecar, version]
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
`

// awaitJobPods waits until the Job name in ns has completed n Pods, and
// returns its Pods; a Pod that failed fails t, with the Pods' logs.
func awaitJobPods(t *testing.T, ctx context.Context, ns, name string, n int32) []corev1.Pod {
	t.Helper()
	eventually(t, ctx, fmt.Sprintf("%d Pods of the Job %s complete", n, name), func() (bool, string) {
		j, err := cl.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if j.Status.Failed > 0 {
			logs, _ := cl.try(ctx, cl.kubectl, "logs", "--namespace", ns, "--selector", "job-name="+name, "--all-containers", "--prefix")
			t.Fatalf("the Job %s failed: %+v\n%s", name, j.Status, logs)
		}
		return j.Status.Succeeded == n, fmt.Sprintf("%d of %d complete", j.Status.Succeeded, n)
	})
	list, err := cl.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != int(n) {
		t.Fatalf("the Job %s has %d Pods, want %d", name, len(list.Items), n)
	}
	return list.Items
}
