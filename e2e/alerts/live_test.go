package alerts

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// liveTuning shortens the for: of the alerts the live test waits for,
// through the chart's own tuning values; LeaderSidecarMultipleLeaders
// keeps a for: longer than a scrape plus an evaluation interval (1s each
// here), as its rule requires.
const liveTuning = `prometheusRule:
  enabled: true
  alerts:
    LeaderSidecarNoLeader: {for: 2s}
    LeaderSidecarAppUnhealthyEverywhere: {for: 2s}
    LeaderSidecarMultipleLeaders: {for: 3s}
`

// liveRules renders the example chart's PrometheusRule with tuning, its
// values, and writes its groups as a Prometheus rule file.
func liveRules(t *testing.T, tuning string) string {
	t.Helper()
	rules := renderedRules(t, sidecartest.Charts(t), tuning)
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(rules))
	}
	raw, err := sigsyaml.Marshal(map[string]any{"groups": specGroups(t, rules[0])})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// The chart's alerts on a real Prometheus that scrapes three real sidecars
// of one election (one SQLite file), each gated on its own app's health:
// with a leader no alert is pending or firing; with every app unhealthy
// (so no replica leads or contends) LeaderSidecarNoLeader and
// LeaderSidecarAppUnhealthyEverywhere go pending, then firing, and no
// other alert does; with the apps healthy again a leader is back and both
// resolve. The new leader's term gap is the time nobody led, give or take
// a scrape. Then every query of the Grafana dashboard but those of its
// shard groups' row runs against the same Prometheus and returns data
// (TestShardAlertsAndDashboardOnALivePrometheus runs those on a group).
func TestAlertsAndDashboardOnALivePrometheus(t *testing.T) {
	// Not parallel: beside the shard group's live test on a loaded machine,
	// its leader once went a renewal short and LeaderSidecarNoLeader was
	// pending while a leader existed.
	began := time.Now()
	rules := liveRules(t, liveTuning)
	db := sidecartest.DBPath(t)
	var apps []*health
	var all []*sidecartest.Sidecar
	var targets []string
	for range 3 {
		app := newHealth(t)
		s := sidecartest.Launch(t, db, "--lease-name", "live", "--app-health-url", app.URL(),
			"--app-health-period", "100ms", "--app-health-failures", "2")
		apps, all = append(apps, app), append(all, s)
	}
	for _, s := range all {
		s.WaitServing()
		targets = append(targets, s.Addr())
	}
	prom := startPrometheus(t, rules, targets)
	leaders := `sum by (namespace, lease) (leader_sidecar_is_leader)`
	awaitValue(t, prom, `count(up == 1)`, "3", 15*time.Second)
	awaitValue(t, prom, leaders, "1", 15*time.Second)
	// A rule evaluation that ran before the leader's first scrape saw no
	// leader; the one after the query above sees it.
	prom.awaitEvaluationAfter(t, time.Now(), 5*time.Second)
	if got := prom.query(t, `count(leader_election_master_status{name="live"} == 0)`); len(got) != 1 || got[0].value() != "2" {
		t.Fatalf("standbys reporting leader_election_master_status 0: %v, want 2", got)
	}
	t.Logf("three sidecars scraped, one leader, %v after the start", time.Since(began).Round(time.Millisecond))

	// With a leader, nothing is pending or firing across three evaluations
	// that saw it.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if a := prom.alerts(t); len(a) > 0 {
			t.Fatalf("with a leader: %s", describe(a))
		}
	}

	// Every app unhealthy: nobody leads or contends. The standbys' apps
	// fail first, and the leader's only once both sidecars sit out: had
	// the leader's failed first, a standby whose own check had not yet
	// failed would take a short term, and the gap asserted below would be
	// the last of several.
	wanted := []string{"LeaderSidecarNoLeader{e2e/live}", "LeaderSidecarAppUnhealthyEverywhere{e2e/live}"}
	leader := sidecartest.AwaitToken(t, all, 1, 5*time.Second)
	for i, s := range all {
		if s != leader {
			apps[i].sick.Store(true)
			sidecartest.WaitTrue(t, "a standby sits out once its app fails", 5*time.Second, func() bool {
				return appHealthy(t, s) == "0"
			})
		}
	}
	sick := time.Now()
	for _, app := range apps {
		app.sick.Store(true)
	}
	pending, firing := map[string]time.Duration{}, map[string]time.Duration{}
	for len(firing) < len(wanted) {
		if time.Since(sick) > 20*time.Second {
			t.Fatalf("20s after every app turned unhealthy: pending %v, firing %v", pending, firing)
		}
		for name, state := range prom.alerts(t) {
			if !contains(wanted, name) {
				t.Fatalf("with every app unhealthy, %s is %s", name, state)
			}
			if _, seen := pending[name]; !seen {
				pending[name] = time.Since(sick) // pending or firing: it is first seen in one of them
			}
			if _, seen := firing[name]; !seen && state == "firing" {
				firing[name] = time.Since(sick)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, name := range wanted {
		if pending[name] >= firing[name] {
			t.Errorf("%s was never seen pending before firing", name)
		}
		t.Logf("%s: pending %v, firing %v after every app turned unhealthy", name,
			pending[name].Round(10*time.Millisecond), firing[name].Round(10*time.Millisecond))
	}

	// Healthy again: a leader is back, and both alerts resolve.
	healed := time.Now()
	leaderless := healed.Sub(sick)
	for _, app := range apps {
		app.sick.Store(false)
	}
	for a := prom.alerts(t); len(a) > 0; a = prom.alerts(t) {
		if time.Since(healed) > 20*time.Second {
			t.Fatalf("20s after the apps turned healthy: %s", describe(a))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("every alert resolved %v after the apps turned healthy", time.Since(healed).Round(10*time.Millisecond))
	awaitValue(t, prom, leaders, "1", 10*time.Second)

	// The new leader's gap: from the release it saw to its own term.
	awaitValue(t, prom, `sum(leader_sidecar_term_gap_seconds_count)`, "1", 10*time.Second)
	gap := seconds(t, prom.query(t, `sum(leader_sidecar_term_gap_seconds_sum)`))
	if gap < (leaderless-2*time.Second).Seconds() || gap > (leaderless+3*time.Second).Seconds() {
		t.Errorf("term gap %.2fs; nobody led for about %v", gap, leaderless.Round(10*time.Millisecond))
	}
	if released := seconds(t, prom.query(t, `sum(leader_sidecar_leadership_transitions_total{reason="released"})`)); released != 1 {
		t.Errorf("%v terms ended released, want 1 (the leader whose app turned unhealthy)", released)
	}
	t.Logf("term gap %.2fs after %v without a leader", gap, leaderless.Round(10*time.Millisecond))

	t.Run("dashboard queries return data", func(t *testing.T) {
		ran := 0
		for _, q := range dashboardQueries(t, "live") {
			if q.row == shardsRow {
				continue
			}
			ran++
			if got := prom.query(t, q.expr); len(got) == 0 {
				t.Errorf("%s: %q returned no data", q.where, q.expr)
			}
		}
		t.Logf("%d dashboard queries, each with data", ran)
	})
	t.Logf("whole test %v", time.Since(began).Round(time.Millisecond))
}

// shardTuning shortens the for: of LeaderSidecarShardUnowned, which the
// live shard test waits for, through the chart's own tuning values.
const shardTuning = `prometheusRule:
  enabled: true
  alerts:
    LeaderSidecarShardUnowned: {for: 1s}
`

// The chart's alerts and the dashboard's shard row on a real Prometheus
// that scrapes two real sidecars of one shard group (8 shards, one SQLite
// file, at most 4 each), spread: an evaluation comes at which no alert is
// pending or firing, and every query of the row returns data, the shards
// held by nobody and twice reading 0. Then one replica is killed
// (SIGKILL): the other, at its cap of 4, cannot take the dead one's
// shards, so each of those shards, and only those, has one alert
// LeaderSidecarShardUnowned firing, no other alert is pending or firing,
// and the dashboard counts 4 shards held by nobody. LeaderSidecarRenewFailing
// is let be throughout: on a loaded machine a renewal fails now and then,
// and the alert stays pending for 5 minutes after.
func TestShardAlertsAndDashboardOnALivePrometheus(t *testing.T) {
	t.Parallel() // after TestAlertsAndDashboardOnALivePrometheus, which is not: both wait on scrapes
	began := time.Now()
	db := sidecartest.DBPath(t)
	args := append([]string{"--lease-name", "shop", "--shard-max-per-member", "4"}, sidecartest.ShardArgs()...)
	live := []*sidecartest.Sidecar{sidecartest.Launch(t, db, args...), sidecartest.Launch(t, db, args...)}
	var targets []string
	for _, s := range live {
		s.WaitServing()
		targets = append(targets, s.Addr())
	}
	// Prometheus scrapes its targets only a few seconds after it is ready,
	// time in which the replicas spread the shards. Spread, as Prometheus
	// sees it: each shard claimed by one replica, 4 on each.
	prom := startPrometheus(t, liveRules(t, shardTuning), targets)
	awaitValue(t, prom, `count(sum by (name) (leader_election_master_status{name=~"shop-shard-.*"}) == 1)`, "8", 20*time.Second)
	awaitValue(t, prom, `count(leader_sidecar_shards_held{lease="shop"} == 4)`, "2", 10*time.Second)
	awaitValue(t, prom, `count(count_over_time(leader_sidecar_shards_held{lease="shop"}[1m]) >= 2)`, "2", 10*time.Second)
	t.Logf("spread, and two scrapes of both replicas, %v after the start", time.Since(began).Round(time.Millisecond))
	active := func() []alert {
		var out []alert
		for _, a := range prom.activeAlerts(t) {
			if a.Labels["alertname"] != "LeaderSidecarRenewFailing" {
				out = append(out, a)
			}
		}
		return out
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		prom.awaitEvaluationAfter(t, time.Now(), 5*time.Second)
		a := active()
		if len(a) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with the shards spread, still active 10s after two scrapes of each: %v", a)
		}
	}

	var nobodyOrTwice []string
	ran := 0
	for _, q := range dashboardQueries(t, "shop") {
		if q.row != shardsRow {
			continue
		}
		ran++
		got := prom.query(t, q.expr)
		if len(got) == 0 {
			t.Errorf("%s: %q returned no data", q.where, q.expr)
		}
		if strings.Contains(q.where, "held by nobody or twice") {
			nobodyOrTwice = append(nobodyOrTwice, q.expr)
			if len(got) != 1 || got[0].value() != "0" {
				t.Errorf("%s: %v with every shard held once, want one sample 0", q.where, got)
			}
		}
	}
	if ran < 6 || len(nobodyOrTwice) != 2 {
		t.Fatalf("%d queries in the dashboard's row %q, %d of them shards held by nobody or twice; want 6 or more, and 2",
			ran, shardsRow, len(nobodyOrTwice))
	}
	t.Logf("no alert; %d queries of the row %s, each with data, %v after the start",
		ran, shardsRow, time.Since(began).Round(time.Millisecond))

	victim := live[1]
	st, err := victim.Shards()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, h := range st.Held {
		want[fmt.Sprintf("shop-shard-%d", h.Shard)] = true
	}
	if len(want) != 4 {
		t.Fatalf("the replica to kill holds %v, want 4 shards", st.Held)
	}
	victim.Signal(syscall.SIGKILL)
	killed := time.Now()
	for {
		firing := map[string]bool{}
		for _, a := range active() {
			name, shard := a.Labels["alertname"], a.Labels["name"]
			if name != "LeaderSidecarShardUnowned" || !want[shard] || a.Labels["lease"] != "shop" {
				t.Fatalf("after the kill: %s %s is %s (labels %v); only LeaderSidecarShardUnowned on %v may be",
					name, shard, a.State, a.Labels, want)
			}
			if _, twice := firing[shard]; twice {
				t.Fatalf("after the kill: two alerts LeaderSidecarShardUnowned on %s", shard)
			}
			firing[shard] = a.State == "firing"
		}
		done := len(firing) == len(want)
		for _, f := range firing {
			done = done && f
		}
		if done {
			break
		}
		if time.Since(killed) > 15*time.Second {
			t.Fatalf("15s after the kill, LeaderSidecarShardUnowned firing (true) or pending (false): %v; want firing on %v", firing, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("LeaderSidecarShardUnowned firing on each of the killed replica's %d shards, and nothing else, %v after the kill",
		len(want), time.Since(killed).Round(10*time.Millisecond))
	awaitValue(t, prom, nobodyOrTwice[0], "4", 5*time.Second)
	if got := prom.query(t, nobodyOrTwice[1]); len(got) != 1 || got[0].value() != "0" {
		t.Errorf("shards held twice: %v, want one sample 0", got)
	}
	t.Logf("whole test %v", time.Since(began).Round(time.Millisecond))
}

// awaitValue polls the instant query expr until its one sample's value is
// want.
func awaitValue(t *testing.T, prom *prometheus, expr, want string, within time.Duration) {
	t.Helper()
	var last []sample
	deadline := time.Now().Add(within)
	for {
		last = prom.query(t, expr)
		if len(last) == 1 && last[0].value() == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v after %v, want one sample %s", expr, last, within, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// appHealthy is the value of leader_sidecar_app_healthy that s exposes.
func appHealthy(t *testing.T, s *sidecartest.Sidecar) string {
	t.Helper()
	resp, err := sidecartest.Client.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "leader_sidecar_app_healthy") {
			fields := strings.Fields(line)
			return fields[len(fields)-1]
		}
	}
	t.Fatalf("sidecar %s exposes no leader_sidecar_app_healthy", s.Addr())
	return ""
}

func seconds(t *testing.T, v []sample) float64 {
	t.Helper()
	if len(v) != 1 {
		t.Fatalf("%v: want one sample", v)
	}
	f, err := strconv.ParseFloat(v[0].value(), 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
