//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLibraryCronJobRunsOneAtATime installs the CronJob of the library's
// README (a helm create chart, followed literally, with sidecar
// waitForLeadership) and starts two runs of it at once by hand, which
// concurrencyPolicy Forbid does not stop. Both complete, one after the
// other, by the node's timestamps: the second run's job starts only after
// its sidecar leads, which is after the first run's sidecar stopped
// leading to release the Lease, which it did after the first run's job
// ended; tokens t and t+1.
func TestLibraryCronJobRunsOneAtATime(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cl.namespace(t)
	chart := cronJobChart(t, ctx)
	cl.run(t, ctx, cl.helm, "install", "shop", chart, "--namespace", ns, "--set", "sidecar.waitForLeadership=true")
	for _, run := range []string{"run-1", "run-2"} {
		cl.run(t, ctx, cl.kubectl, "create", "job", "--namespace", ns, "--from=cronjob/shop-myapp", run)
	}
	eventually(t, ctx, "both runs complete", func() (bool, string) {
		for _, run := range []string{"run-1", "run-2"} {
			j, err := cl.client.BatchV1().Jobs(ns).Get(ctx, run, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if j.Status.Failed > 0 {
				t.Fatalf("%s failed: %+v", run, j.Status)
			}
			if j.Status.Succeeded != 1 {
				return false, run + " not complete"
			}
		}
		return true, ""
	})

	var pods []corev1.Pod
	for _, name := range []string{"run-1", "run-2"} {
		list, err := cl.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 {
			t.Fatalf("%s has %d Pods, want 1", name, len(list.Items))
		}
		pods = append(pods, list.Items[0])
	}
	oneRunAfterAnother(t, ctx, ns, pods)
}

// oneRunAfterAnother checks two completed Pods whose container "job" ran
// only while their sidecar (waitForLeadership) led: the second's sidecar
// led only after the first's stopped leading, each job started after its
// sidecar led, the first let go (released, or handed off to the second as
// it stopped) only after its job ended, and the two
// printed different tokens (the job asks the sidecar for /leader).
func oneRunAfterAnother(t *testing.T, ctx context.Context, ns string, pods []corev1.Pod) {
	t.Helper()
	if len(pods) != 2 {
		t.Fatalf("%d Pods, want 2 runs", len(pods))
	}
	type run struct {
		pod                string
		leads, jobStarted  time.Time
		jobEnded, released time.Time
		// stopped is when the sidecar stopped claiming, before it sent
		// the release (logged once the release was answered, which may
		// be after the next run's sidecar took it over).
		stopped time.Time
		token   string
	}
	var runs []run
	for _, pod := range pods {
		p := pod.Name
		r := run{pod: p,
			leads: firstLogged(t, ctx, ns, p, sidecarContainer, `"msg":"became leader"`),
			// A release, or a hand-off to the other run's sidecar
			// as this one stopped.
			released: firstLoggedOneOf(t, ctx, ns, p, sidecarContainer, `"msg":"released the lease"`,
				`"msg":"handed leadership off on shutdown"`),
			stopped:    firstLogged(t, ctx, ns, p, sidecarContainer, `"msg":"stopped leading"`),
			jobStarted: firstLogged(t, ctx, ns, p, "job"),
		}
		logs := cl.run(t, ctx, cl.kubectl, "logs", "--namespace", ns, p, "--container", "job")
		_, after, ok := strings.Cut(logs, `"token":`)
		if !ok {
			t.Fatalf("%s: the job printed no token: %q", p, logs)
		}
		r.token, _, _ = strings.Cut(after, ",")
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == "job" && s.State.Terminated != nil {
				r.jobEnded = s.State.Terminated.FinishedAt.Time
			}
		}
		runs = append(runs, r)
	}
	if runs[1].leads.Before(runs[0].leads) {
		runs[0], runs[1] = runs[1], runs[0]
	}
	first, second := runs[0], runs[1]
	t.Logf("first run %s: leads %s, job ends %s, releases %s (token %s); second run %s: leads %s, job starts %s (token %s)",
		first.pod, first.leads.Format(time.RFC3339Nano), first.jobEnded.Format(time.RFC3339), first.released.Format(time.RFC3339Nano), first.token,
		second.pod, second.leads.Format(time.RFC3339Nano), second.jobStarted.Format(time.RFC3339Nano), second.token)
	switch {
	case !first.jobStarted.After(first.leads):
		t.Errorf("the first job started at %v, before its sidecar led at %v", first.jobStarted, first.leads)
	case !second.leads.After(first.stopped):
		t.Errorf("the second run led at %v, before the first stopped leading at %v", second.leads, first.stopped)
	case !second.jobStarted.After(second.leads):
		t.Errorf("the second job started at %v, before its sidecar led at %v", second.jobStarted, second.leads)
	case first.released.Before(first.jobEnded.Truncate(time.Second)):
		t.Errorf("the first run released at %v, before its job ended at %v", first.released, first.jobEnded)
	case first.token == second.token:
		t.Errorf("both runs had token %s", first.token)
	}
}

// cronJobChart makes the CronJob chart of the library's README in a
// directory of the test: helm create's chart with the library, its RBAC
// and its CronJob, whose job asks the sidecar for /leader and prints it
// (the sidecar's own image and probe command, as the app).
func cronJobChart(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	cl.run(t, ctx, cl.helm, "create", filepath.Join(dir, "myapp"))
	chart := filepath.Join(dir, "myapp")
	readme := readFile(t, filepath.Join(cl.root, "charts", "leader-sidecar-lib", "README.md"))
	lib := filepath.Join(cl.root, "charts", "leader-sidecar-lib")
	dep := codeBlock(t, readme, "`Chart.yaml` of your chart:")
	appendFile(t, filepath.Join(chart, "Chart.yaml"), strings.Replace(dep, `"file://../leader-sidecar-lib"`, `"file://`+lib+`"`, 1))
	writeFile(t, filepath.Join(chart, "templates", "rbac.yaml"), codeBlock(t, readme, "`templates/rbac.yaml`"))
	cronJob := codeBlock(t, readme, "`templates/cronjob.yaml`:")
	out, err := exec.CommandContext(ctx, filepath.Join(cl.root, "hack", "chart-images.sh")).Output()
	sidecar, _, _ := strings.Cut(strings.TrimPrefix(string(out), "sidecar "), "\n")
	if err != nil || !strings.HasPrefix(string(out), "sidecar ") {
		t.Fatalf("the sidecar's image from hack/chart-images.sh: %q %v", out, err)
	}
	writeFile(t, filepath.Join(chart, "templates", "cronjob.yaml"), strings.Replace(cronJob,
		"              image: my/job\n", fmt.Sprintf(probeJob, sidecar), 1))
	if !strings.Contains(readFile(t, filepath.Join(chart, "templates", "cronjob.yaml")), "/sidecar") {
		t.Fatalf("no job container with image my/job in the README's CronJob:\n%s", cronJob)
	}
	cl.run(t, ctx, cl.helm, "dependency", "build", chart)
	return chart
}

// probeJob is the job container in place of the README's my/job: the
// sidecar's image (%s), whose probe command prints the sidecar's /leader
// (with its token) and exits, as restricted Pod Security wants it.
const probeJob = `              image: %s
              imagePullPolicy: IfNotPresent
              command: [/sidecar, probe, --address, "127.0.0.1:4040", /leader]
              securityContext:
                runAsNonRoot: true
                runAsUser: 65532
                allowPrivilegeEscalation: false
                readOnlyRootFilesystem: true
                capabilities: {drop: [ALL]}
                seccompProfile: {type: RuntimeDefault}
`
