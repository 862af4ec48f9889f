package metrics

import (
	"sync/atomic"
	"testing"
)

// app_healthy follows the check's verdict at scrape time, labelled with
// the lease like every metric of the sidecar's own.
func TestAppHealthyGauge(t *testing.T) {
	m := New(Info{Lease: "billing", Version: "v1", Backend: "sqlite"})
	if gather(t, m)["leader_sidecar_app_healthy"] != nil {
		t.Fatal("app_healthy registered without a check of the app")
	}
	var healthy atomic.Bool
	m.WatchAppHealth(healthy.Load)
	for _, want := range []bool{false, true, false} {
		healthy.Store(want)
		f := gather(t, m)["leader_sidecar_app_healthy"]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("app_healthy: %v", f)
		}
		series := f.GetMetric()[0]
		got := series.GetGauge().GetValue()
		if (got == 1) != want || got != 0 && got != 1 || labels(series)["lease"] != "billing" {
			t.Fatalf("app_healthy %v %v, want %v with lease billing", got, labels(series), want)
		}
	}
}
