package process

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestChartWaitForLeadership renders sidecar.waitForLeadership: the native
// sidecar's startup probe asks /leader/ready without giving up, and the
// Deployment is recreated, never rolled (a new Pod could not become
// available while an old one leads). Off, the startup probe asks /healthz.
func TestChartWaitForLeadership(t *testing.T) {
	dir := sidecartest.Charts(t)
	probe := func(values string) (*corev1.Probe, appsv1.DeploymentStrategyType) {
		dep := sidecartest.One[*appsv1.Deployment](t, sidecartest.RenderChart(t, dir, "apps", values))
		c := sidecartest.ContainerNamed(dep.Spec.Template.Spec.InitContainers, "leader-sidecar")
		if c == nil || c.StartupProbe == nil || c.StartupProbe.HTTPGet == nil {
			t.Fatalf("no native sidecar with an HTTP startup probe in %+v", dep.Spec.Template.Spec.InitContainers)
		}
		return c.StartupProbe, dep.Spec.Strategy.Type
	}

	p, strategy := probe("sidecar:\n  waitForLeadership: true\n")
	if p.HTTPGet.Path != "/leader/ready" || p.FailureThreshold != 2147483647 {
		t.Errorf("startup probe %s, failureThreshold %d; want /leader/ready, never giving up", p.HTTPGet.Path, p.FailureThreshold)
	}
	if strategy != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %s, want Recreate", strategy)
	}

	p, strategy = probe("")
	if p.HTTPGet.Path != "/healthz" || p.FailureThreshold != 60 {
		t.Errorf("default startup probe %s, failureThreshold %d; want /healthz, 60", p.HTTPGet.Path, p.FailureThreshold)
	}
	if strategy != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("default strategy %s, want RollingUpdate", strategy)
	}

	_, err := sidecartest.TemplateChart(t, dir, "apps", "sidecar:\n  waitForLeadership: true\n  native: false\n")
	if want := "sidecar.waitForLeadership needs sidecar.native true"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("waitForLeadership without a native sidecar: want an error with %q, got %v", want, err)
	}
}

// TestChartAppDataVolume renders app.dataVolume: an emptyDir by default,
// or the one volume source given (here a claim every replica mounts).
func TestChartAppDataVolume(t *testing.T) {
	dir := sidecartest.Charts(t)
	volume := func(values string) corev1.Volume {
		pod := sidecartest.One[*appsv1.Deployment](t, sidecartest.RenderChart(t, dir, "apps", values)).Spec.Template.Spec
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "app-data" })
		if i < 0 {
			t.Fatalf("no volume app-data in %+v", pod.Volumes)
		}
		return pod.Volumes[i]
	}
	if v := volume(""); v.EmptyDir == nil {
		t.Errorf("default app-data %+v, want an emptyDir", v.VolumeSource)
	}
	v := volume("app:\n  dataVolume:\n    persistentVolumeClaim:\n      claimName: shared\n")
	if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "shared" || v.EmptyDir != nil {
		t.Errorf("app-data %+v, want only the claim shared", v.VolumeSource)
	}
	if _, err := sidecartest.TemplateChart(t, dir, "apps", "app:\n  dataVolume:\n    emptyDir: {}\n    hostPath: {path: /srv}\n"); err == nil {
		t.Errorf("an app.dataVolume with two sources rendered; the schema should refuse it")
	}
}
