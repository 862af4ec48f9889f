package process

import (
	"os"
	"path/filepath"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// cronJobChart is a helm create chart with the library and the library
// README's CronJob in templates/cronjob.yaml.
func cronJobChart(t testing.TB) string {
	t.Helper()
	chart := sidecartest.HelmCreateWithLibrary(t)
	cronJob := sidecartest.ReadmeBlock(t, "kind: CronJob", "concurrencyPolicy:")
	if err := os.WriteFile(filepath.Join(chart, "templates", "cronjob.yaml"), []byte(cronJob), 0o644); err != nil {
		t.Fatal(err)
	}
	return chart
}

// The library README's CronJob, followed literally, renders a Job Pod
// whose native sidecar holds the job container back until it leads, runs
// as the chart's ServiceAccount with the token mounted into the sidecar
// alone, and never restarts the job.
func TestChartLibraryCronJob(t *testing.T) {
	r, err := sidecartest.TemplateMyChart(t, cronJobChart(t), "sidecar.waitForLeadership=true")
	if err != nil {
		t.Fatal(err)
	}
	cj := sidecartest.One[*batchv1.CronJob](t, r)
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy %s, want Forbid", cj.Spec.ConcurrencyPolicy)
	}
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	sc := sidecartest.ContainerNamed(pod.InitContainers, "leader-sidecar")
	switch {
	case sc == nil || sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways:
		t.Fatalf("no native sidecar in %+v", pod.InitContainers)
	case sc.StartupProbe == nil || sc.StartupProbe.HTTPGet == nil || sc.StartupProbe.HTTPGet.Path != "/leader/ready":
		t.Errorf("the sidecar's startup probe %+v does not wait for leadership", sc.StartupProbe)
	case sidecartest.ContainerNamed(pod.Containers, "job") == nil:
		t.Errorf("no job container in %+v", pod.Containers)
	case pod.RestartPolicy != corev1.RestartPolicyNever:
		t.Errorf("restartPolicy %s, want Never", pod.RestartPolicy)
	case pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken:
		t.Errorf("the Pod automounts a ServiceAccount token")
	case pod.ServiceAccountName != "shop-mychart":
		t.Errorf("serviceAccountName %q, want the chart's shop-mychart", pod.ServiceAccountName)
	}
	var token bool
	for _, v := range pod.Volumes {
		if v.Projected != nil {
			sidecartest.CheckTokenVolume(t, v)
			token = true
		}
	}
	if !token {
		t.Errorf("no projected token volume for the sidecar in %+v", pod.Volumes)
	}
}
