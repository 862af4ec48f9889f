package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/leader-sidecar/leader-sidecar/internal/kubetest"
	"github.com/leader-sidecar/leader-sidecar/internal/pgtest"
)

// bench is one run: its configuration, binaries, API server and
// PostgreSQL server.
type bench struct {
	cfg         config
	kube        *kubetest.Env  // nil when no measurement of the run needs it
	pg          *pgtest.Server // nil when no measurement of the run needs it
	pgDB        *sql.DB        // on pg: the bench's own reads of the records
	tmp         string
	sidecarBin  string
	clientGoBin string
	trivialBin  string
	seq         atomic.Int64
}

func (b *bench) logf(format string, args ...any) { b.cfg.Log(fmt.Sprintf(format, args...)) }

// results is everything one run measured; a measurement that did not run
// leaves its part empty, and its section of the page out.
type results struct {
	Handoff   map[string][]trial // key: system/profile/backend
	Failover  map[string][]trial
	Floor     map[string][]trial // key: floorLeaseHandoff, floorSQLiteHandoff, floorFailover, floorPostgres*
	Cost      []costResult
	Elections []electionsResult
	Load      map[string]loadResult // "trivial", "sidecar"
	Footprint map[string]footprint  // by system
	BinSize   map[string]int64
	Startup   map[string]startupResult
	// Shard mode (shards.go).
	ShardStop  []shardStopResult
	ShardScale []shardScaleResult
	ShardCost  []shardCostResult
	Started    time.Time
	Took       time.Duration
	// Load is /proc/loadavg's 1, 5 and 15 minute averages at the start
	// and at the end: other work on the machine distorts the figures.
	LoadAvg [2]string
}

func key(sys string, p profile, backend string) string { return sys + "/" + p.Name + "/" + backend }

// measurement is one part of the benchmark.
type measurement struct {
	name          string
	needsAPI      bool // needs the envtest API server
	needsPostgres bool // needs a PostgreSQL server
	measure       func(*bench, *results) error
}

// measurements, in the order a run makes them.
var measurements = []measurement{
	{"handoff", true, false, measureHandoff},
	{"handoff-sqlite", false, false, measureHandoffSQLite},
	{"handoff-postgres", false, true, measureHandoffPostgres},
	{"failover", true, false, measureFailover},
	{"failover-postgres", false, true, measureFailoverPostgres},
	{"cost", true, false, measureCost},
	{"elections", true, false, measureElections},
	{"throughput", false, false, measureThroughput},
	{"footprint", true, false, measureFootprint},
	{"startup", true, false, measureStartup},
	{"shard-stop", true, false, measureShardStop},
	{"shard-scale", true, false, measureShardScale},
	{"shard-cost", true, false, measureShardCost},
}

func measurementNames() []string {
	var names []string
	for _, m := range measurements {
		names = append(names, m.name)
	}
	return names
}

// runs reports whether the run includes the measurement name.
func (c config) runs(name string) bool { return len(c.Only) == 0 || slices.Contains(c.Only, name) }

// run makes the configured measurements and renders the page; a full run,
// or a partial one given -out, also writes it and the plots into c.Out.
func run(c config) (string, error) {
	if c.Render != "" {
		return renderSaved(c)
	}
	b := &bench{cfg: c}
	res := &results{Handoff: map[string][]trial{}, Failover: map[string][]trial{}, Floor: map[string][]trial{}, Load: map[string]loadResult{},
		Footprint: map[string]footprint{}, BinSize: map[string]int64{}, Startup: map[string]startupResult{}, Started: time.Now()}
	res.LoadAvg[0] = loadAverage()
	stop, err := b.setUp(res)
	defer stop()
	if err != nil {
		return "", err
	}
	for _, m := range measurements {
		if c.runs(m.name) {
			b.logf("%s", m.name)
			if err := m.measure(b, res); err != nil {
				// What was measured before the error is kept.
				res.Took, res.LoadAvg[1] = time.Since(res.Started), loadAverage()
				if serr := save(c, res); serr != nil {
					b.logf("-save: %v", serr)
				}
				return "", fmt.Errorf("%s: %w", m.name, err)
			}
		}
	}
	res.Took, res.LoadAvg[1] = time.Since(res.Started), loadAverage()
	if err := save(c, res); err != nil {
		return "", err
	}
	page := render(c, res)
	if len(c.Only) > 0 && !c.OutSet {
		return page, nil
	}
	return page, write(c.Out, page, res)
}

// save writes the results to c.Save, if set.
func save(c config, res *results) error {
	if c.Save == "" {
		return nil
	}
	data, err := json.MarshalIndent(saved{c, res}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.Save, data, 0o644)
}

// saved is what -save writes and -render reads: a run's configuration and
// results.
type saved struct {
	Config  config
	Results *results
}

// renderSaved writes the page and the plots of the results in c.Render
// into c.Out, as the run that measured them would have.
func renderSaved(c config) (string, error) {
	data, err := os.ReadFile(c.Render)
	if err != nil {
		return "", err
	}
	var s saved
	if err := json.Unmarshal(data, &s); err != nil {
		return "", fmt.Errorf("-render %s: %w", c.Render, err)
	}
	page := render(s.Config, s.Results)
	if len(s.Config.Only) > 0 && !c.OutSet {
		return page, nil
	}
	return page, write(c.Out, page, s.Results)
}

// write puts the page and the plots into dir.
func write(dir, page string, res *results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := plots(dir, res); err != nil {
		return fmt.Errorf("plotting: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "benchmarks.md"), []byte(page), 0o644)
}

// setUp makes the temporary directory, the binaries and, if a measurement
// needs them, the API server and the PostgreSQL server; stop undoes what
// was done, also after an error.
func (b *bench) setUp(res *results) (stop func(), err error) {
	var undo []func()
	stop = func() {
		killAll()
		for _, f := range slices.Backward(undo) {
			f()
		}
	}
	if b.tmp, err = os.MkdirTemp("", "leader-sidecar-bench"); err != nil {
		return stop, err
	}
	undo = append(undo, func() { os.RemoveAll(b.tmp) })
	if err := b.build(res); err != nil {
		return stop, err
	}
	for _, m := range measurements {
		if m.needsAPI && b.cfg.runs(m.name) {
			b.logf("starting kube-apiserver and etcd")
			if b.kube, err = kubetest.Start(); err != nil {
				return stop, fmt.Errorf("starting envtest: %w", err)
			}
			undo = append(undo, func() { _ = b.kube.Stop() })
			break
		}
	}
	for _, m := range measurements {
		if m.needsPostgres && b.cfg.runs(m.name) {
			b.logf("starting PostgreSQL")
			if b.pg, err = pgtest.Start(); err != nil {
				return stop, fmt.Errorf("starting PostgreSQL: %w", err)
			}
			undo = append(undo, func() { _ = b.pg.Stop() })
			if b.pgDB, err = sql.Open("pgx", b.pg.DSN); err != nil {
				return stop, err
			}
			undo = append(undo, func() { _ = b.pgDB.Close() })
			break
		}
	}
	return stop, nil
}

// build compiles the sidecar (unless -sidecar names one), the client-go
// candidate and the trivial server from the module this program belongs
// to, as the Dockerfile builds the sidecar.
func (b *bench) build(res *results) error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	targets := []struct {
		pkg string
		bin *string
		sys string
	}{
		{"./cmd/sidecar", &b.sidecarBin, sysSidecar},
		{"./hack/bench/clientgo", &b.clientGoBin, sysClientGo},
		{"./hack/bench/trivial", &b.trivialBin, ""},
	}
	for _, t := range targets {
		*t.bin = filepath.Join(b.tmp, filepath.Base(t.pkg))
		if t.sys == sysSidecar && b.cfg.SidecarBin != "" {
			*t.bin = b.cfg.SidecarBin
		} else {
			b.logf("building %s", t.pkg)
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", *t.bin, t.pkg)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("building %s: %v\n%s", t.pkg, err, out)
			}
		}
		if fi, err := os.Stat(*t.bin); err != nil {
			return err
		} else if t.sys != "" {
			res.BinSize[t.sys] = fi.Size()
		}
	}
	return nil
}
