package sqlite

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// BenchmarkUpdate measures one compare-and-swap write: BEGIN IMMEDIATE,
// version check, counter, row update and a durable (synchronous=FULL) WAL
// commit. This is the cost of one renewal.
func BenchmarkUpdate(b *testing.B) {
	be := openT(b, filepath.Join(b.TempDir(), "leader.db"), "bench")
	ctx := context.Background()
	v, err := be.Create(ctx, backendtest.SampleRecord("a", 1))
	if err != nil {
		b.Fatal(err)
	}
	rec := backendtest.SampleRecord("a", 1)
	for b.Loop() {
		if v, err = be.Update(ctx, v, rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGet measures one read of the record.
func BenchmarkGet(b *testing.B) {
	be := openT(b, filepath.Join(b.TempDir(), "leader.db"), "bench")
	ctx := context.Background()
	if _, err := be.Create(ctx, backendtest.SampleRecord("a", 1)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := be.Get(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckFile measures the check Get, Create and Update each make
// that the path still names the file opened: one stat and a comparison.
func BenchmarkCheckFile(b *testing.B) {
	be := openT(b, filepath.Join(b.TempDir(), "leader.db"), "bench")
	for b.Loop() {
		if err := be.checkFile(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWatchSignalsAWrite measures how soon a watch on another handle
// signals a write: from the start of an Update (whose commit includes an
// fsync of the -wal) to the signal, with a PollInterval of an hour, so
// only the notification of the write can bring it. It reports the median
// and the 99th percentile as well as the mean.
func BenchmarkWatchSignalsAWrite(b *testing.B) {
	path := filepath.Join(b.TempDir(), "leader.db")
	ctx := context.Background()
	standby, err := Open(ctx, Options{Path: path, Election: "bench", PollInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = standby.Close() }()
	leader := openT(b, path, "bench")
	v, err := leader.Create(ctx, backendtest.SampleRecord("a", 1))
	if err != nil {
		b.Fatal(err)
	}
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	changes := standby.Watch(watchCtx)
	<-changes // the baseline every watch starts with
	rec := backendtest.SampleRecord("a", 1)
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		if v, err = leader.Update(ctx, v, rec); err != nil {
			b.Fatal(err)
		}
		select {
		case <-changes:
		case <-time.After(10 * time.Second):
			b.Fatal("no signal within 10s")
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}
