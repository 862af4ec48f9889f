package sqlite

import (
	"context"
	"path/filepath"
	"testing"

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
