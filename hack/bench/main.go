// Command bench measures leader-sidecar against a candidate built on
// client-go's tools/leaderelection (ReleaseOnCancel), on one envtest API
// server in one run: graceful hand-off and crash fail-over latency, each
// beside its floor (the sidecar's also on SQLite and on a throwaway
// PostgreSQL server, internal/pgtest, started only when a PostgreSQL
// measurement runs), API server requests per minute for 1..N standbys, many
// elections on one API server, GET /leader throughput against a trivial
// net/http handler, and footprint; and, in shard mode, how fast a gracefully
// stopped replica's shards move, how many shards a scale-up moves against
// the fewest it must, and the API server requests of a group against its
// number of shards. It writes docs/benchmarks.md and plots next to it.
//
//	export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh | tail -1)
//	go run ./hack/bench
//
// Each measurement lives in a file of its own (handoff.go, failover.go,
// cost.go, elections.go, throughput.go, footprint.go, startup.go,
// shardstop.go, shardscale.go, shardcost.go on the machinery of shards.go)
// with the section of the page it renders; handoff.go also holds
// handoff-sqlite and handoff-postgres, failover.go failover-postgres (the
// sidecar alone: client-go has no PostgreSQL). The hand-off and fail-over
// measurements also measure their floors, the least code that does the
// same work (floor.go, floor_sqlite.go, floor_lease.go,
// floor_postgres.go). -only runs some of them and
// prints their sections without writing anything; -smoke runs every
// measurement once or twice with the short timings only, in seconds (the
// test in this directory does that). -save keeps a run's results, from
// which -render writes the page and plots again without measuring. -only
// with -out writes its partial page and plots into that directory (not
// docs, whose page it would replace).
//
// # Many elections
//
// A point of the many-elections measurement (elections.go) is (elections,
// replicas, system, renew setting): -elections and -replicas take lists,
// -elections-renew a list of "default" (each system's own: the sidecar
// renews every lease/3, client-go every retry period) and fractions of the
// lease, given to the sidecar as --renew-interval and to client-go as
// --retry-period, the only knob that sets how often its leader renews (its
// standbys then poll at that rate too). A fraction either binary refuses at
// the timings of the run is refused with its reason: at the default
// timings lease/2 (7.5s) passes the sidecar's rule (renew interval + 1.2 ×
// retry period < renew deadline: 7.5s + 2.4s < 10s); at the short timings it
// does not. Each (replicas, renew setting, system) is one series on a
// fresh API server (-elections-fresh-server), its election counts in
// ascending order, each adding elections to those running; points of more
// than -elections-max-candidates processes are skipped. The section's
// model (elections_model.go) is fitted from the points when the page is
// rendered, so page and data cannot drift.
//
// The large run, on an otherwise idle machine:
//
//	go run ./hack/bench -only elections -elections 50,100,200 -replicas 2,3 \
//		-elections-renew default,1/2 -save /tmp/elections.json -out /tmp/elections
//
// measures 50, 100 and 200 elections of 2 replicas and 50 and 100 of 3
// (200 × 3 is over the default bound of 400 processes), at both renew
// settings, for both systems: 20 points in 8 series, about two hours. A
// point takes its start-up, a lease for a sidecar's new Leases, the settle
// time, the window and 20 hand-offs, which are the longest part: some 6 s
// each, and about 20 s for client-go at lease/2 (its standbys poll every
// 7.5 s); -elections-trials 10 halves them.
//
// What it needs: up to 400 candidate processes at once beside
// kube-apiserver and etcd. Each candidate costs the bench process about
// six descriptors (its proxy's listener and connections, its pipes: 136 at
// 20 sidecars) and under 1 MiB, so ulimit -n must be above some 3000
// (20000 here); each candidate is one process of a few threads, a few
// thousand threads in all, far below pid_max (32768) and threads-max; the
// candidates' RSS, 18 to 22 MiB each, counts the binary's shared pages in
// each, so 400 of them hold well under 9 GiB, and with the servers and the
// bench under 10 GiB. The proxies are goroutines of the bench process, one
// TLS connection to kube-apiserver each, and the candidates on a Lease use
// no inotify. The two CPUs are the limit: 400 idle Go processes take a
// part of them, which the hand-off p99 under load shows; the page records
// the load average.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

type config struct {
	Smoke          bool
	Out            string   // directory of benchmarks.md and the plots
	OutSet         bool     // -out was given: a run of -only writes its partial page and plots there too
	Only           []string // measurements to run (names in measurements); nil: all
	SidecarBin     string   // a sidecar binary to measure instead of building ./cmd/sidecar
	Trials         int      // hand-off trials per system and profile on a Lease
	SQLiteTrials   int      // hand-off trials per profile on SQLite
	PostgresTrials int      // hand-off trials per profile on PostgreSQL
	CrashTrials    int      // fail-over trials per system, short profile
	CrashDefault   int      // fail-over trials per system, default profile
	Standbys       []int
	CostWindow     time.Duration // default profile; the short profile uses a third, at least 5s
	CostProfiles   []string
	Elections      electionsConfig
	Shards         shardsConfig
	Idle           time.Duration // footprint: how long leader and standby idle before RSS is read
	// IdleTimings are the timings of the footprint and start-up
	// measurements: the default ones, the short ones in -smoke (where a
	// fresh Lease's first leader then waits 3s, not 15s).
	IdleTimings  profile
	LoadDuration time.Duration
	Concurrency  int
	LogLevel     string // the sidecars' --log-level: debug logs every store request and decision (the steps of a trial)
	Command      string
	Save         string       // file to write the results to, as JSON
	Render       string       // file of results to render the page from, measuring nothing
	Log          func(string) `json:"-"`
}

func main() {
	releaserMain()
	c, err := parseFlags(os.Args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	page, err := run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Print(page)
}

// parseFlags reads the command line into a config.
func parseFlags(args []string) (config, error) {
	var c config
	var standbys, elections, replicas, renews, costProfiles, only, shardBackends, shardSteps, shardCounts, shardCostProfile string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.BoolVar(&c.Smoke, "smoke", false, "a seconds-long run with a trial or two of each measurement (short timings only)")
	fs.StringVar(&c.Out, "out", "docs", "directory for benchmarks.md and the plots")
	fs.StringVar(&only, "only", "", "run only these measurements (comma-separated: "+strings.Join(measurementNames(), ", ")+"), print them and write nothing unless -out is given")
	fs.StringVar(&c.SidecarBin, "sidecar", "", "measure this sidecar binary instead of building ./cmd/sidecar (to compare builds)")
	fs.IntVar(&c.Trials, "trials", 30, "graceful hand-off trials per system and profile on a Lease")
	fs.IntVar(&c.SQLiteTrials, "sqlite-trials", 100, "graceful hand-off trials per profile on SQLite (about a second each)")
	fs.IntVar(&c.PostgresTrials, "postgres-trials", 100, "graceful hand-off trials per profile on PostgreSQL (about a second each)")
	fs.IntVar(&c.CrashTrials, "crash-trials", 10, "crash fail-over trials per system and backend with the short profile")
	fs.IntVar(&c.CrashDefault, "crash-trials-default", 10, "crash fail-over trials per system and backend with the default profile (each waits out a 15s lease)")
	fs.StringVar(&standbys, "standbys", "1,10,50", "standby counts for the API server cost")
	fs.DurationVar(&c.CostWindow, "cost-window", 30*time.Second, "measurement window of the API server cost (default profile; the short profile uses a third, at least 5s)")
	fs.StringVar(&costProfiles, "cost-profiles", "default,short", "profiles for the API server cost")
	fs.StringVar(&elections, "elections", "50", "election counts on one API server in the many-elections measurement (comma-separated; each replica count, renew setting and system runs them as one series, adding elections)")
	fs.StringVar(&replicas, "replicas", "2,3", "replicas per election in the many-elections measurement")
	fs.StringVar(&renews, "elections-renew", "default", "renew settings of the many-elections measurement (comma-separated): default (the sidecar renews every lease/3, client-go every retry period, 2s) or a fraction of the lease such as 1/3 or 1/2 (the sidecar's --renew-interval, client-go's --retry-period)")
	fs.DurationVar(&c.Elections.Window, "elections-window", time.Minute, "measurement window of the many-elections cost")
	fs.IntVar(&c.Elections.MaxCandidates, "elections-max-candidates", 400, "skip the many-elections points of more candidates (elections × replicas) than this; 0: no limit")
	fs.BoolVar(&c.Elections.FreshServer, "elections-fresh-server", true, "start each many-elections series (replica count, renew setting, system) on a fresh kube-apiserver and etcd, so that no series inherits another's memory")
	fs.IntVar(&c.Elections.Trials, "elections-trials", 20, "graceful hand-offs of one election while the others run")
	fs.StringVar(&shardBackends, "shard-backends", "sqlite,lease", "backends of the shard-mode moves (shard-stop, shard-scale)")
	fs.IntVar(&c.Shards.Shards, "shards", 8, "shards of the group in shard-stop and shard-scale")
	fs.IntVar(&c.Shards.StopTrials, "shard-stop-trials", 30, "graceful stops per backend in shard-stop")
	fs.StringVar(&shardSteps, "shard-scale", "3-5,3-4,1-3", "scale-ups in shard-scale, from-to replicas (comma-separated)")
	fs.IntVar(&c.Shards.ScaleTrials, "shard-scale-trials", 10, "trials per backend and scale-up in shard-scale, each on a fresh group")
	fs.StringVar(&shardCounts, "shard-counts", "1,8,32,64", "shard counts of shard-cost, one group of 3 replicas on Leases each")
	fs.DurationVar(&c.Shards.CostWindow, "shard-cost-window", time.Minute, "measurement window of shard-cost")
	fs.StringVar(&shardCostProfile, "shard-cost-timings", "default", "timings of shard-cost: default or short")
	fs.DurationVar(&c.Idle, "idle", 30*time.Second, "how long an idle leader and standby run before their RSS is read")
	fs.DurationVar(&c.LoadDuration, "load-duration", 5*time.Second, "duration of each GET /leader load run")
	fs.IntVar(&c.Concurrency, "concurrency", 32, "load generator workers")
	fs.StringVar(&c.Save, "save", "", "also write the results to this file (JSON), for -render")
	fs.StringVar(&c.Render, "render", "", "measure nothing: write the page and plots into -out from the results -save wrote")
	fs.StringVar(&c.LogLevel, "log-level", "info", "the sidecars' --log-level (debug: the steps of each hand-off and fail-over in detail, at some cost)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) { c.OutSet = c.OutSet || f.Name == "out" })
	for name, n := range map[string]int{"-trials": c.Trials, "-sqlite-trials": c.SQLiteTrials, "-postgres-trials": c.PostgresTrials, "-elections-trials": c.Elections.Trials,
		"-shard-stop-trials": c.Shards.StopTrials, "-shard-scale-trials": c.Shards.ScaleTrials} {
		if n < 1 {
			return c, fmt.Errorf("%s: must be at least 1, got %d", name, n)
		}
	}
	if c.Elections.MaxCandidates < 0 {
		return c, fmt.Errorf("-elections-max-candidates: must be 0 (no limit) or more, got %d", c.Elections.MaxCandidates)
	}
	var err error
	if c.Standbys, err = parseCounts("-standbys", standbys); err != nil {
		return c, err
	}
	if c.Elections.Counts, err = parseCounts("-elections", elections); err != nil {
		return c, err
	}
	slices.Sort(c.Elections.Counts)
	c.Elections.Counts = slices.Compact(c.Elections.Counts)
	if c.Elections.Replicas, err = parseCounts("-replicas", replicas); err != nil {
		return c, err
	}
	if c.Elections.Renews, err = parseRenews(renews); err != nil {
		return c, err
	}
	if c.Shards.Shards < 1 || c.Shards.Shards > 256 {
		return c, fmt.Errorf("-shards: must be 1 to 256, got %d", c.Shards.Shards)
	}
	if c.Shards.CostShards, err = parseCounts("-shard-counts", shardCounts); err != nil {
		return c, err
	}
	if slices.ContainsFunc(c.Shards.CostShards, func(n int) bool { return n > 256 }) {
		return c, fmt.Errorf("bad -shard-counts %q: at most 256 shards", shardCounts)
	}
	if c.Shards.Steps, err = parseSteps(shardSteps); err != nil {
		return c, err
	}
	c.Shards.Backends = strings.Split(shardBackends, ",")
	for _, be := range c.Shards.Backends {
		if be != "sqlite" && be != "lease" {
			return c, fmt.Errorf("-shard-backends: unknown backend %q (known: sqlite, lease)", be)
		}
	}
	c.Shards.Replicas, c.Shards.Profile, c.Shards.CostProfile = 3, profShort, profDefault
	switch shardCostProfile {
	case "default":
	case "short":
		c.Shards.CostProfile = profShort
	default:
		return c, fmt.Errorf("-shard-cost-timings: want default or short, got %q", shardCostProfile)
	}
	if only != "" {
		c.Only = strings.Split(only, ",")
		for _, m := range c.Only {
			if !slices.Contains(measurementNames(), m) {
				return c, fmt.Errorf("-only: unknown measurement %q (known: %s)", m, strings.Join(measurementNames(), ", "))
			}
		}
	}
	c.CostProfiles = strings.Split(costProfiles, ",")
	c.Elections.Profile, c.IdleTimings = profDefault, profDefault
	c.Command = "go run ./hack/bench " + strings.Join(args, " ")
	c.Log = func(s string) { fmt.Fprintln(os.Stderr, s) }
	if c.Smoke {
		c = smokeConfig(c)
	}
	for _, rs := range c.Elections.Renews {
		if err := rs.check(c.Elections.Profile); err != nil {
			return c, err
		}
	}
	return c, nil
}

// parseCounts parses a comma-separated list of positive numbers.
func parseCounts(flagName, list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad %s %q", flagName, list)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseSteps parses a comma-separated list of scale-ups, from-to
// replicas, each to more replicas than from.
func parseSteps(list string) ([]scaleStep, error) {
	var out []scaleStep
	for _, s := range strings.Split(list, ",") {
		from, to, ok := strings.Cut(strings.TrimSpace(s), "-")
		f, err1 := strconv.Atoi(from)
		t, err2 := strconv.Atoi(to)
		if !ok || err1 != nil || err2 != nil || f < 1 || t <= f {
			return nil, fmt.Errorf("bad -shard-scale %q: want from-to replicas, such as 3-5, with to above from", list)
		}
		out = append(out, scaleStep{f, t})
	}
	return out, nil
}

// smokeConfig shrinks c to a seconds-long run: a trial of each hand-off
// and fail-over on a Lease and on PostgreSQL and of their floors, two
// hand-offs on SQLite and on PostgreSQL, and a trial of each shard-mode
// measurement on groups of 4 shards.
func smokeConfig(c config) config {
	c.Smoke = true
	c.Trials, c.SQLiteTrials, c.PostgresTrials, c.CrashTrials, c.CrashDefault = 1, 2, 2, 1, 0
	c.Standbys = []int{1}
	c.CostWindow = 2 * time.Second
	c.CostProfiles = []string{"short"}
	// Many elections: a series of two counts per system, renewing every
	// lease/4, on the one API server (a fresh one takes seconds).
	c.Elections = electionsConfig{Counts: []int{1, 2}, Replicas: []int{2}, Renews: []renewSetting{{Name: "1/4", Num: 1, Den: 4}},
		Window: time.Second, Trials: 1, Profile: profShort}
	c.Idle, c.IdleTimings = time.Second, profShort
	c.LoadDuration = 500 * time.Millisecond
	// Shard mode: the moves on SQLite only (the group's code is the same
	// on Leases, whose start waits a lease), the cost on Leases.
	c.Shards = shardsConfig{Backends: []string{"sqlite"}, Shards: 4, StopTrials: 1, Steps: []scaleStep{{1, 2}}, ScaleTrials: 1,
		CostShards: []int{4}, CostWindow: 2 * time.Second, Replicas: 3, Profile: profShort, CostProfile: profShort}
	return c
}

// idleTimings are the timings of the footprint and start-up measurements:
// config.IdleTimings, or the default ones if unset.
func (c config) idleTimings() profile {
	if c.IdleTimings.Name == "" {
		return profDefault
	}
	return c.IdleTimings
}
