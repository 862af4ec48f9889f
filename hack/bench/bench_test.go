package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain runs the test binary as the SQLite floor's releasing process
// when the bench starts it as one (floor_sqlite.go).
func TestMain(m *testing.M) {
	releaserMain()
	os.Exit(m.Run())
}

// TestSmoke runs every measurement of the benchmark once or twice with the
// short timings (the footprint and start-up too), the many elections at 1 and 2 x 2 (each renewing every
// lease/4) for a second each and their model, the
// shard-mode measurements on groups of 4 shards (a 1 → 2 scale-up moves
// exactly the 2 shards it must), so the
// program cannot rot, and renders the page again from the saved results. It needs envtest (KUBEBUILDER_ASSETS) and
// the PostgreSQL server binaries (internal/pgtest), and fails without them.
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
		"| leader-sidecar | 1/4 (750ms) | 1 × 2 |", "| leader-sidecar | 1/4 (750ms) | 2 × 2 |", "| client-go | 1/4 (750ms) | 2 × 2 |", "2 / 2",
		"### Model", "| leader-sidecar | 1/4 | kube-apiserver CPU, s/min | 2 |", "| client-go | 1/4 | etcd RSS growth, MiB | 2 |", "The renew interval", "req/s", "idle RSS", "RSS split, idle leader / standby: anonymous", "[footprint.md](footprint.md)", "| process start → leads on a free Lease (short timings) |", "(short timings, Lease, 1 standby", "Targets", "idle RSS ≤ 16.0 MiB on both backends",
		"| sqlite hand-off | short | 2 |", "| lease hand-off | short |", "| fail-over beyond the lease | short |", "within 1.5× its floor's p99",
		"| short | postgres | leader-sidecar | 2 |", "| short | postgres | leader-sidecar | 1 |", "| postgres hand-off | short | 2 |", "| postgres fail-over beyond the lease | short | 1 |",
		"Shard mode", "| sqlite | short | 1 |", "| sqlite | short | 4 | 1 → 2 | 1 | 2.0, 2 |", "| shards | replicas | held after | window |", "| 2s | ["} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if t.Failed() {
		t.Log(page)
	}
}

// TestFlags: -only names measurements that exist, counts are positive, and
// -smoke shrinks the many elections to 1 and 2 x 2; the election counts
// are sorted, and a renew setting either system refuses at the timings of
// the run is refused.
func TestFlags(t *testing.T) {
	c, err := parseFlags([]string{"-only", "elections,footprint", "-replicas", "2,3", "-elections", "200,50,100,50", "-elections-renew", "default,1/2", "-out", "/tmp/x"})
	if err != nil || !c.runs("elections") || c.runs("handoff") || !slices.Equal(c.Elections.Counts, []int{50, 100, 200}) || len(c.Elections.Replicas) != 2 ||
		!slices.Equal(c.Elections.Renews, []renewSetting{renewDefault, {"1/2", 1, 2}}) || !c.OutSet {
		t.Fatalf("parseFlags: %+v, %v", c, err)
	}
	if c, err := parseFlags(nil); err != nil || c.OutSet || !slices.Equal(c.Elections.Renews, []renewSetting{renewDefault}) || c.Elections.MaxCandidates != 400 || !c.Elections.FreshServer {
		t.Fatalf("parseFlags without flags: OutSet %v, renews %v, %v", c.OutSet, c.Elections.Renews, err)
	}
	c, err = parseFlags([]string{"-only", "shard-scale", "-shard-scale", "3-5,1-3", "-shard-backends", "lease"})
	if err != nil || !c.runs("shard-scale") || c.runs("shard-stop") || !slices.Equal(c.Shards.Steps, []scaleStep{{3, 5}, {1, 3}}) ||
		!slices.Equal(c.Shards.Backends, []string{"lease"}) || c.Shards.Replicas != 3 {
		t.Fatalf("parseFlags of the shard-mode flags: %+v, %v", c.Shards, err)
	}
	c, err = parseFlags([]string{"-only", "handoff-postgres,failover-postgres", "-postgres-trials", "5"})
	if err != nil || !c.runs("handoff-postgres") || !c.runs("failover-postgres") || c.runs("failover") || c.PostgresTrials != 5 {
		t.Fatalf("parseFlags of the PostgreSQL measurements: %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"-only", "nonsense"}, {"-replicas", "0"}, {"-standbys", "x"}, {"-sqlite-trials", "0"}, {"-postgres-trials", "0"}, {"-trials", "-1"},
		{"-shard-scale", "5-3"}, {"-shard-scale", "3"}, {"-shard-backends", "etcd"}, {"-shards", "0"}, {"-shard-counts", "300"}, {"-shard-stop-trials", "0"}, {"-shard-cost-timings", "long"},
		{"-elections", "0"}, {"-elections-renew", "1/1"}, {"-elections-renew", "third"}, {"-elections-renew", "3/2"}, {"-elections-max-candidates", "-1"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
	c, err = parseFlags([]string{"-smoke"})
	if err != nil || !slices.Equal(c.Elections.Counts, []int{1, 2}) || c.Elections.Replicas[0] != 2 || c.Elections.Profile != profShort {
		t.Fatalf("-smoke: %+v, %v", c.Elections, err)
	}
	if c.idleTimings() != profShort {
		t.Errorf("-smoke: footprint and start-up at the %s timings, want the short ones", c.idleTimings().Name)
	}
	if c, _ := parseFlags(nil); c.idleTimings() != profDefault {
		t.Errorf("footprint and start-up at the %s timings, want the default ones", c.idleTimings().Name)
	}
}

// TestRenewSettings: a fraction of the lease is the sidecar's
// --renew-interval and client-go's retry period; default leaves each
// system its own; lease/2 passes the sidecar's rule at the default timings
// (7.5s against 10s - 1.2 x 2s) and not at the short ones (1.5s against
// 2s - 1.2 x 0.5s), and the margin a missed renewal leaves is stated.
func TestRenewSettings(t *testing.T) {
	half := renewSetting{"1/2", 1, 2}
	if iv := renewDefault.interval(sysSidecar, profDefault); iv != 5*time.Second {
		t.Errorf("default sidecar renew interval: %v, want 5s", iv)
	}
	if iv := renewDefault.interval(sysClientGo, profDefault); iv != 2*time.Second {
		t.Errorf("default client-go renew interval: %v, want its retry period, 2s", iv)
	}
	if p, extra := half.apply(sysSidecar, profDefault); p != profDefault || !slices.Equal(extra, []string{"--renew-interval", "7.5s"}) {
		t.Errorf("1/2 for the sidecar: %+v %q", p, extra)
	}
	if p, extra := half.apply(sysClientGo, profDefault); p.Retry != 7500*time.Millisecond || p.Lease != profDefault.Lease || extra != nil {
		t.Errorf("1/2 for client-go: %+v %q", p, extra)
	}
	if err := half.check(profDefault); err != nil {
		t.Errorf("1/2 at the default timings: %v", err)
	}
	if err := half.check(profShort); err == nil || !strings.Contains(err.Error(), "sidecar refuses") {
		t.Errorf("1/2 at the short timings: %v, want the sidecar's refusal", err)
	}
	for _, c := range []struct {
		iv      time.Duration
		left    time.Duration
		retries int
	}{{5 * time.Second, 10 * time.Second, 2}, {7500 * time.Millisecond, 7500 * time.Millisecond, 1}} {
		if left, retries := renewMargin(c.iv, profDefault); left != c.left || retries != c.retries {
			t.Errorf("renewMargin(%v): %v, %d retries; want %v, %d", c.iv, left, retries, c.left, c.retries)
		}
	}
}

// TestElectionsModel: the fit recovers the base and the two slopes of
// points on an exact plane, tells them apart only with two replica counts,
// and finds where the line meets the budget.
func TestElectionsModel(t *testing.T) {
	point := func(elections, replicas int) electionsResult {
		cpu := 2 + 0.05*float64(elections) + 0.01*float64(elections*replicas) // s/min
		return electionsResult{Elections: elections, Replicas: replicas, Window: time.Minute, APIServer: time.Duration(cpu * float64(time.Second))}
	}
	y := func(e electionsResult) float64 { return perMinD(e.APIServer, e.Window) }
	f, ok := fitElections([]electionsResult{point(50, 2), point(100, 2), point(200, 2), point(100, 3)}, y)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	if !ok || !near(f.Base, 2) || !near(f.PerElection, 0.05) || !near(f.PerReplica, 0.01) || f.Replicas != 0 {
		t.Fatalf("fit on two replica counts: %+v, %v", f, ok)
	}
	if n := f.electionsAt(budgetCPU, 2); !near(n, (60-2)/0.07) {
		t.Errorf("elections at one core, x2: %v", n)
	}
	f, ok = fitElections([]electionsResult{point(50, 2), point(100, 2)}, y)
	if !ok || !near(f.PerElection, 0.07) || f.PerReplica != 0 || f.Replicas != 2 {
		t.Errorf("fit on one replica count: %+v, %v", f, ok)
	}
	if _, ok := fitElections([]electionsResult{point(50, 2), point(50, 3)}, y); ok {
		t.Error("a fit of one election count: accepted")
	}
	if _, ok := fitElections([]electionsResult{point(50, 2)}, y); ok {
		t.Error("a fit of one point: accepted")
	}
}
