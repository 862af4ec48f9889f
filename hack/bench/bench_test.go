package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMain runs the test binary as the SQLite floor's releasing process
// when the bench starts it as one (floor_sqlite.go).
func TestMain(m *testing.M) {
	releaserMain()
	os.Exit(m.Run())
}

// TestSmoke runs every measurement of the benchmark once or twice with the
// short timings, the many elections at 3 x 2 for a few seconds, the
// shard-mode measurements on groups of 4 shards (a 1 → 2 scale-up moves
// exactly the 2 shards it must), so the
// program cannot rot, and renders the page again from the saved results. It needs envtest (KUBEBUILDER_ASSETS) and fails
// without it.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts envtest and some thirty processes")
	}
	out := t.TempDir()
	saved := filepath.Join(t.TempDir(), "results.json")
	c := smokeConfig(config{Out: out, Concurrency: 8, Command: "go run ./hack/bench -smoke", Save: saved, Log: func(s string) { t.Log(s) }})
	page, err := run(c)
	if err != nil {
		t.Fatal(err)
	}
	again := t.TempDir()
	if rendered, err := run(config{Render: saved, Out: again}); err != nil || rendered != page {
		t.Errorf("-render of the saved results: %v; the page differs: %v", err, rendered != page)
	}
	if fi, err := os.Stat(filepath.Join(again, handoffPlot)); err != nil || fi.Size() == 0 {
		t.Errorf("-render wrote no %s: %v", handoffPlot, err)
	}
	for _, f := range []string{"benchmarks.md", handoffPlot, failoverPlot, electionsPlot} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Fatalf("%s not written: %v", f, err)
		}
	}
	for _, s := range []string{"Graceful hand-off", "| short | sqlite | leader-sidecar |", "client-go", "Many elections",
		"| leader-sidecar | 3 × 2 |", "| client-go | 3 × 2 |", "3 / 3", "req/s", "idle RSS", "RSS split, idle leader / standby: anonymous", "[footprint.md](footprint.md)", "Targets",
		"| sqlite hand-off | short | 2 |", "| lease hand-off | short |", "| fail-over beyond the lease | short |", "within 1.5× its floor's p99",
		"Shard mode", "| sqlite | short | 1 |", "| sqlite | short | 4 | 1 → 2 | 1 | 2.0, 2 |", "| 4 | 3 | 2s | ["} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if t.Failed() {
		t.Log(page)
	}
}

// TestFlags: -only names measurements that exist, counts are positive, and
// -smoke shrinks the many elections to 3 x 2.
func TestFlags(t *testing.T) {
	c, err := parseFlags([]string{"-only", "elections,footprint", "-replicas", "2,3", "-elections", "50"})
	if err != nil || !c.runs("elections") || c.runs("handoff") || c.Elections.Count != 50 || len(c.Elections.Replicas) != 2 {
		t.Fatalf("parseFlags: %+v, %v", c, err)
	}
	c, err = parseFlags([]string{"-only", "shard-scale", "-shard-scale", "3-5,1-3", "-shard-backends", "lease"})
	if err != nil || !c.runs("shard-scale") || c.runs("shard-stop") || !slices.Equal(c.Shards.Steps, []scaleStep{{3, 5}, {1, 3}}) ||
		!slices.Equal(c.Shards.Backends, []string{"lease"}) || c.Shards.Replicas != 3 {
		t.Fatalf("parseFlags of the shard-mode flags: %+v, %v", c.Shards, err)
	}
	for _, bad := range [][]string{{"-only", "nonsense"}, {"-replicas", "0"}, {"-standbys", "x"}, {"-sqlite-trials", "0"}, {"-trials", "-1"},
		{"-shard-scale", "5-3"}, {"-shard-scale", "3"}, {"-shard-backends", "etcd"}, {"-shards", "0"}, {"-shard-counts", "300"}, {"-shard-stop-trials", "0"}, {"-shard-cost-timings", "long"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
	c, err = parseFlags([]string{"-smoke"})
	if err != nil || c.Elections.Count != 3 || c.Elections.Replicas[0] != 2 || c.Elections.Profile != profShort {
		t.Fatalf("-smoke: %+v, %v", c.Elections, err)
	}
}
