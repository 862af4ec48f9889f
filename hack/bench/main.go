// Command bench measures leader-sidecar against a candidate built on
// client-go's tools/leaderelection (ReleaseOnCancel), on one envtest API
// server in one run: graceful hand-off and crash fail-over latency, API
// server requests per minute for 1..N standbys, GET /leader throughput
// against a trivial net/http handler, and footprint. It writes
// docs/benchmarks.md and latency plots next to it.
//
//	export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh | tail -1)
//	go run ./hack/bench
//
// -smoke runs every measurement once or twice with the short timings only,
// in seconds (the test in this directory does that).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/kubetest"
)

type config struct {
	Smoke        bool
	Out          string // directory of benchmarks.md and the plots
	Trials       int    // hand-off trials per system and profile
	CrashTrials  int    // fail-over trials per system, short profile
	CrashDefault int    // fail-over trials per system, default profile
	Standbys     []int
	CostWindow   time.Duration // default profile; the short profile uses a quarter, at least 5s
	CostProfiles []string
	LoadDuration time.Duration
	Concurrency  int
	SQLite       bool
	// SQLiteHandoffOnly measures the SQLite hand-off alone (sqliteHandoff).
	SQLiteHandoffOnly bool
	Command           string
	Log               func(string)
}

type bench struct {
	cfg         config
	kube        *kubetest.Env
	tmp         string
	sidecarBin  string
	clientGoBin string
	trivialBin  string
	seq         atomic.Int64
}

func (b *bench) logf(format string, args ...any) { b.cfg.Log(fmt.Sprintf(format, args...)) }

func main() {
	var c config
	var standbys, costProfiles string
	flag.BoolVar(&c.Smoke, "smoke", false, "a seconds-long run with a trial or two of each measurement (short timings only)")
	flag.StringVar(&c.Out, "out", "docs", "directory for benchmarks.md and the plots")
	flag.IntVar(&c.Trials, "trials", 30, "graceful hand-off trials per system and profile")
	flag.IntVar(&c.CrashTrials, "crash-trials", 10, "crash fail-over trials per system with the short profile")
	flag.IntVar(&c.CrashDefault, "crash-trials-default", 10, "crash fail-over trials per system with the default profile (each waits out a 15s lease)")
	flag.StringVar(&standbys, "standbys", "1,10,50", "standby counts for the API server cost")
	flag.DurationVar(&c.CostWindow, "cost-window", 30*time.Second, "measurement window of the API server cost (default profile; the short profile uses a third, at least 5s)")
	flag.StringVar(&costProfiles, "cost-profiles", "default,short", "profiles for the API server cost")
	flag.DurationVar(&c.LoadDuration, "load-duration", 5*time.Second, "duration of each GET /leader load run")
	flag.IntVar(&c.Concurrency, "concurrency", 32, "load generator workers")
	flag.BoolVar(&c.SQLite, "sqlite", true, "also measure the sidecar's hand-off on the SQLite backend")
	flag.BoolVar(&c.SQLiteHandoffOnly, "sqlite-handoff-only", false, "measure only the sidecar's hand-off on the SQLite backend (-trials per profile; no API server), print it and write nothing")
	flag.Parse()
	for _, s := range strings.Split(standbys, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bad -standbys %q\n", standbys)
			os.Exit(2)
		}
		c.Standbys = append(c.Standbys, n)
	}
	c.CostProfiles = strings.Split(costProfiles, ",")
	c.Command = "go run ./hack/bench " + strings.Join(os.Args[1:], " ")
	c.Log = func(s string) { fmt.Fprintln(os.Stderr, s) }
	if c.Smoke {
		c = smokeConfig(c)
	}
	measure := run
	if c.SQLiteHandoffOnly {
		measure = sqliteHandoff
	}
	page, err := measure(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Print(page)
}

// smokeConfig shrinks c to a seconds-long run.
func smokeConfig(c config) config {
	c.Smoke = true
	c.Trials, c.CrashTrials, c.CrashDefault = 2, 1, 0
	c.Standbys = []int{1, 2}
	c.CostWindow = 2 * time.Second
	c.CostProfiles = []string{"short"}
	c.LoadDuration = 500 * time.Millisecond
	return c
}

// results is everything one run measured.
type results struct {
	Handoff   map[string][]trial // key: system/profile/backend
	Failover  map[string][]trial
	Cost      []costResult
	Load      map[string]loadResult // "trivial", "sidecar"
	BinSize   map[string]int64
	FirstAns  time.Duration
	LeadStart map[string]time.Duration
	Started   time.Time
	Took      time.Duration
}

func key(sys string, p profile, backend string) string { return sys + "/" + p.Name + "/" + backend }

func run(c config) (string, error) {
	b := &bench{cfg: c}
	res := &results{Handoff: map[string][]trial{}, Failover: map[string][]trial{}, Load: map[string]loadResult{},
		BinSize: map[string]int64{}, LeadStart: map[string]time.Duration{}, Started: time.Now()}
	var err error
	if b.tmp, err = os.MkdirTemp("", "leader-sidecar-bench"); err != nil {
		return "", err
	}
	defer os.RemoveAll(b.tmp)
	defer killAll()
	if err := b.build(res); err != nil {
		return "", err
	}
	b.logf("starting kube-apiserver and etcd")
	if b.kube, err = kubetest.Start(); err != nil {
		return "", fmt.Errorf("starting envtest: %w", err)
	}
	defer b.kube.Stop()

	profiles := []profile{profDefault, profShort}
	if c.Smoke {
		profiles = []profile{profShort}
	}
	systems := []string{sysSidecar, sysClientGo}

	b.logf("graceful hand-off")
	for _, p := range profiles {
		for _, sys := range systems {
			t, err := b.takeovers(sys, p, "lease", syscall.SIGTERM, c.Trials)
			if err != nil {
				return "", fmt.Errorf("hand-off %s %s: %w", sys, p.Name, err)
			}
			res.Handoff[key(sys, p, "lease")] = t
		}
		if c.SQLite {
			t, err := b.takeovers(sysSidecar, p, "sqlite", syscall.SIGTERM, c.Trials)
			if err != nil {
				return "", fmt.Errorf("hand-off sqlite %s: %w", p.Name, err)
			}
			res.Handoff[key(sysSidecar, p, "sqlite")] = t
		}
	}

	b.logf("crash fail-over")
	for _, p := range []profile{profShort, profDefault} {
		n := c.CrashTrials
		if p == profDefault {
			n = c.CrashDefault
		}
		if n == 0 {
			continue
		}
		for _, sys := range systems {
			t, err := b.takeovers(sys, p, "lease", syscall.SIGKILL, n)
			if err != nil {
				return "", fmt.Errorf("fail-over %s %s: %w", sys, p.Name, err)
			}
			res.Failover[key(sys, p, "lease")] = t
		}
	}

	b.logf("API server cost")
	for _, pn := range c.CostProfiles {
		p := profShort
		w := max(c.CostWindow/3, 5*time.Second)
		if pn == "default" {
			p, w = profDefault, c.CostWindow
		}
		if c.Smoke {
			w = c.CostWindow
		}
		for _, n := range c.Standbys {
			for _, sys := range systems {
				r, err := b.cost(sys, p, n, w)
				if err != nil {
					return "", fmt.Errorf("cost %s %s %d: %w", sys, p.Name, n, err)
				}
				res.Cost = append(res.Cost, r)
			}
		}
	}

	b.logf("GET /leader throughput")
	if err := b.throughput(res); err != nil {
		return "", err
	}

	b.logf("start-up")
	for _, sys := range systems {
		first, lead, err := b.startup(sys, profDefault)
		if err != nil {
			return "", fmt.Errorf("start-up %s: %w", sys, err)
		}
		if sys == sysSidecar {
			res.FirstAns = first
		}
		res.LeadStart[sys] = lead
	}
	res.Took = time.Since(res.Started)

	page := render(c, res)
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return "", err
	}
	if err := plots(c.Out, res); err != nil {
		return "", fmt.Errorf("plotting: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.Out, "benchmarks.md"), []byte(page), 0o644); err != nil {
		return "", err
	}
	return page, nil
}

// build compiles the sidecar, the client-go candidate and the trivial
// server from the module this program belongs to.
func (b *bench) build(res *results) error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	for _, t := range []struct {
		pkg string
		bin *string
		sys string
	}{
		{"./cmd/sidecar", &b.sidecarBin, sysSidecar},
		{"./hack/bench/clientgo", &b.clientGoBin, sysClientGo},
		{"./hack/bench/trivial", &b.trivialBin, ""},
	} {
		*t.bin = filepath.Join(b.tmp, filepath.Base(t.pkg))
		b.logf("building %s", t.pkg)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", *t.bin, t.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %v\n%s", t.pkg, err, out)
		}
		if t.sys != "" {
			if fi, err := os.Stat(*t.bin); err == nil {
				res.BinSize[t.sys] = fi.Size()
			}
		}
	}
	return nil
}
