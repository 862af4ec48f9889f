package main

import (
	"context"
	"os/exec"
	"strings"
	"time"
)

// throughput loads a trivial handler and a sidecar's GET /leader in turn.
func (b *bench) throughput(res *results) error {
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

	ns := "throughput"
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

var _ = context.Background
