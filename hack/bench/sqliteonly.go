package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// sqliteHandoff measures only the sidecar's graceful hand-off on the
// SQLite backend, which needs no API server, and prints one line per
// profile; it writes no page and no plot.
func sqliteHandoff(c config) (string, error) {
	b := &bench{cfg: c}
	var err error
	if b.tmp, err = os.MkdirTemp("", "leader-sidecar-bench"); err != nil {
		return "", err
	}
	defer os.RemoveAll(b.tmp)
	defer killAll()
	if err := b.build(&results{BinSize: map[string]int64{}}); err != nil {
		return "", err
	}
	var out strings.Builder
	fmt.Fprintf(&out, "| timings | trials | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|\n")
	for _, p := range []profile{profDefault, profShort} {
		ts, err := b.takeovers(sysSidecar, p, "sqlite", syscall.SIGTERM, c.Trials)
		if err != nil {
			return "", fmt.Errorf("hand-off sqlite %s: %w", p.Name, err)
		}
		d := sorted(ts, lat)
		fmt.Fprintf(&out, "| %s | %d | %s | %s | %s | %s |\n", p.Name, len(d), ms(pct(d, 50)), ms(pct(d, 90)), ms(pct(d, 99)), ms(d[len(d)-1]))
	}
	return out.String(), nil
}

// sqliteName is a file name for an election without an API server.
func (b *bench) sqliteName(base string) string {
	return fmt.Sprintf("%s-%d-%d", base, b.seq.Add(1), time.Now().UnixNano())
}
