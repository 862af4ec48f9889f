// Command bench measures leader-sidecar against a candidate built on
// client-go's tools/leaderelection (ReleaseOnCancel), on one envtest API
// server in one run: graceful hand-off and crash fail-over latency, each
// beside its floor, API server requests per minute for 1..N standbys, many
// elections on one API server, GET /leader throughput against a trivial
// net/http handler, and footprint. It writes docs/benchmarks.md and plots next to it.
//
//	export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh | tail -1)
//	go run ./hack/bench
//
// Each measurement lives in a file of its own (handoff.go, failover.go,
// cost.go, elections.go, throughput.go, footprint.go, startup.go) with the
// section of the page it renders; the hand-off and fail-over measurements
// also measure their floors, the least code that does the same work
// (floor.go, floor_sqlite.go, floor_lease.go). -only runs some of them and
// prints their sections without writing anything; -smoke runs every
// measurement once or twice with the short timings only, in seconds (the
// test in this directory does that). -save keeps a run's results, from
// which -render writes the page and plots again without measuring.
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
	Smoke        bool
	Out          string   // directory of benchmarks.md and the plots
	Only         []string // measurements to run (names in measurements); nil: all
	SidecarBin   string   // a sidecar binary to measure instead of building ./cmd/sidecar
	Trials       int      // hand-off trials per system and profile on a Lease
	SQLiteTrials int      // hand-off trials per profile on SQLite
	CrashTrials  int      // fail-over trials per system, short profile
	CrashDefault int      // fail-over trials per system, default profile
	Standbys     []int
	CostWindow   time.Duration // default profile; the short profile uses a third, at least 5s
	CostProfiles []string
	Elections    electionsConfig
	Idle         time.Duration // footprint: how long leader and standby idle before RSS is read
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
	var standbys, replicas, costProfiles, only string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.BoolVar(&c.Smoke, "smoke", false, "a seconds-long run with a trial or two of each measurement (short timings only)")
	fs.StringVar(&c.Out, "out", "docs", "directory for benchmarks.md and the plots")
	fs.StringVar(&only, "only", "", "run only these measurements (comma-separated: "+strings.Join(measurementNames(), ", ")+"), print them and write nothing")
	fs.StringVar(&c.SidecarBin, "sidecar", "", "measure this sidecar binary instead of building ./cmd/sidecar (to compare builds)")
	fs.IntVar(&c.Trials, "trials", 30, "graceful hand-off trials per system and profile on a Lease")
	fs.IntVar(&c.SQLiteTrials, "sqlite-trials", 100, "graceful hand-off trials per profile on SQLite (about a second each)")
	fs.IntVar(&c.CrashTrials, "crash-trials", 10, "crash fail-over trials per system with the short profile")
	fs.IntVar(&c.CrashDefault, "crash-trials-default", 10, "crash fail-over trials per system with the default profile (each waits out a 15s lease)")
	fs.StringVar(&standbys, "standbys", "1,10,50", "standby counts for the API server cost")
	fs.DurationVar(&c.CostWindow, "cost-window", 30*time.Second, "measurement window of the API server cost (default profile; the short profile uses a third, at least 5s)")
	fs.StringVar(&costProfiles, "cost-profiles", "default,short", "profiles for the API server cost")
	fs.IntVar(&c.Elections.Count, "elections", 50, "elections on one API server in the many-elections measurement")
	fs.StringVar(&replicas, "replicas", "2,3", "replicas per election in the many-elections measurement")
	fs.DurationVar(&c.Elections.Window, "elections-window", time.Minute, "measurement window of the many-elections cost")
	fs.IntVar(&c.Elections.Trials, "elections-trials", 20, "graceful hand-offs of one election while the others run")
	fs.DurationVar(&c.Idle, "idle", 30*time.Second, "how long an idle leader and standby run before their RSS is read")
	fs.DurationVar(&c.LoadDuration, "load-duration", 5*time.Second, "duration of each GET /leader load run")
	fs.IntVar(&c.Concurrency, "concurrency", 32, "load generator workers")
	fs.StringVar(&c.Save, "save", "", "also write the results to this file (JSON), for -render")
	fs.StringVar(&c.Render, "render", "", "measure nothing: write the page and plots into -out from the results -save wrote")
	fs.StringVar(&c.LogLevel, "log-level", "info", "the sidecars' --log-level (debug: the steps of each hand-off and fail-over in detail, at some cost)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	for name, n := range map[string]int{"-trials": c.Trials, "-sqlite-trials": c.SQLiteTrials, "-elections-trials": c.Elections.Trials} {
		if n < 1 {
			return c, fmt.Errorf("%s: must be at least 1, got %d", name, n)
		}
	}
	var err error
	if c.Standbys, err = parseCounts("-standbys", standbys); err != nil {
		return c, err
	}
	if c.Elections.Replicas, err = parseCounts("-replicas", replicas); err != nil {
		return c, err
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
	c.Elections.Profile = profDefault
	c.Command = "go run ./hack/bench " + strings.Join(args, " ")
	c.Log = func(s string) { fmt.Fprintln(os.Stderr, s) }
	if c.Smoke {
		c = smokeConfig(c)
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

// smokeConfig shrinks c to a seconds-long run: a trial of each hand-off
// and fail-over on a Lease and of their floors, two on SQLite.
func smokeConfig(c config) config {
	c.Smoke = true
	c.Trials, c.SQLiteTrials, c.CrashTrials, c.CrashDefault = 1, 2, 1, 0
	c.Standbys = []int{1}
	c.CostWindow = 2 * time.Second
	c.CostProfiles = []string{"short"}
	c.Elections = electionsConfig{Count: 3, Replicas: []int{2}, Window: 3 * time.Second, Trials: 1, Profile: profShort}
	c.Idle = time.Second
	c.LoadDuration = 500 * time.Millisecond
	return c
}
