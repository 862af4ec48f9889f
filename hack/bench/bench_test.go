package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSmoke runs every measurement of the benchmark once or twice with the
// short timings, so the program cannot rot. It needs envtest
// (KUBEBUILDER_ASSETS) and fails without it.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts envtest and some twenty processes")
	}
	out := t.TempDir()
	c := smokeConfig(config{Out: out, Concurrency: 8, SQLite: true, Command: "go run ./hack/bench -smoke", Log: func(s string) { t.Log(s) }})
	page, err := run(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"benchmarks.md", handoffPlot, failoverPlot} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Fatalf("%s not written: %v", f, err)
		}
	}
	for _, s := range []string{"Graceful hand-off", "client-go", "req/s", "Targets"} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
}
