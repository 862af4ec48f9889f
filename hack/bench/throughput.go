package main

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// measureThroughput loads a trivial handler and a sidecar's GET /leader
// in turn.
func measureThroughput(b *bench, res *results) error {
	tr := exec.Command(b.trivialBin, "127.0.0.1:0")
	stdout, err := tr.StdoutPipe()
	if err != nil {
		return err
	}
	if err := tr.Start(); err != nil {
		return err
	}
	defer func() { _ = tr.Process.Kill(); _ = tr.Wait() }()
	buf := make([]byte, 64)
	n, err := stdout.Read(buf)
	if err != nil {
		return err
	}
	trivialAddr := strings.TrimSpace(string(buf[:n]))

	ns, err := b.namespace("throughput")
	if err != nil {
		return err
	}
	sc, err := b.spawn(sysSidecar, profDefault, "sqlite", ns, "bench", true)
	if err != nil {
		return err
	}
	defer sc.stop()
	if err := sc.waitLeading(30 * time.Second); err != nil {
		return err
	}
	// Alternate, so that drift in the machine's load hits both alike.
	half := b.cfg.LoadDuration / 2
	var trivial, side []loadResult
	for i := 0; i < 2; i++ {
		trivial = append(trivial, load("http://"+trivialAddr+"/", b.cfg.Concurrency, half))
		side = append(side, load("http://"+sc.sidecar.Addr()+"/leader", b.cfg.Concurrency, half))
	}
	res.Load["trivial"], res.Load["sidecar"] = merge(trivial), merge(side)
	b.logf("  trivial %.0f req/s, /leader %.0f req/s", res.Load["trivial"].RPS, res.Load["sidecar"].RPS)
	return nil
}

// merge averages two runs (percentiles: the mean of the two).
func merge(rs []loadResult) loadResult {
	var m loadResult
	for _, r := range rs {
		m.Requests += r.Requests
		m.Errors += r.Errors
		m.RPS += r.RPS / float64(len(rs))
		m.P50 += r.P50 / time.Duration(len(rs))
		m.P99 += r.P99 / time.Duration(len(rs))
	}
	return m
}

func renderThroughput(w *page, c config, r *results) {
	tv, sd := r.Load["trivial"], r.Load["sidecar"]
	if tv.Requests == 0 {
		return
	}
	w.section("`GET /leader` on loopback")
	w.p("A Go load generator with %d workers and keep-alive connections, %s per target in two alternating halves, ", c.Concurrency, c.LoadDuration)
	w.p("against a sidecar (leader, SQLite backend: the handler answers from memory either way) and a trivial `net/http` handler in its own process (the ceiling). ")
	w.p("Load generator and server share the machine's %d CPUs.\n\n", runtime.NumCPU())
	w.p("| target | requests | errors | req/s | p50 | p99 |\n|---|---|---|---|---|---|\n")
	w.p("| trivial handler | %d | %d | %.0f | %s | %s |\n", tv.Requests, tv.Errors, tv.RPS, ms(tv.P50), ms(tv.P99))
	w.p("| leader-sidecar `/leader` | %d | %d | %.0f | %s | %s |\n", sd.Requests, sd.Errors, sd.RPS, ms(sd.P50), ms(sd.P99))
	w.p("| ratio | | | %s | | |\n\n", fmt.Sprintf("%.0f%%", 100*sd.RPS/tv.RPS))
}
