package apiserver

import (
	"context"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The example chart with every optional Pod setting
// (sidecartest.PodSettings, which e2e/process/chart_podsettings_test.go
// checks as rendered), a PodDisruptionBudget and a ServiceMonitor is
// accepted by a real API server: every object but the ServiceMonitor,
// whose CRD envtest lacks, in a server-side dry run.
func TestChartPodSettingsAcceptedByTheAPIServer(t *testing.T) {
	values := sidecartest.PodSettings
	dir := sidecartest.Charts(t)
	k := sidecartest.Kube(t)
	d := newDryRunner(t, k.Config)
	ns := k.Namespace(t)
	out, err := sidecartest.TemplateChart(t, dir, ns, values+"podDisruptionBudget:\n  enabled: true\nserviceMonitor:\n  enabled: true\n")
	if err != nil {
		t.Fatal(err)
	}
	r, monitors := sidecartest.RenderWithMonitors(t, out)
	if len(monitors) != 1 {
		t.Fatalf("%d monitors", len(monitors))
	}
	// Every object but the ServiceMonitor, whose CRD envtest lacks.
	for _, o := range r.Raw {
		if err := d.create(context.Background(), o, ns, true); err != nil {
			t.Fatalf("the API server refused %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}

}
