package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sim"
)

// Candidates that trust any lease a record declares leave some schedules
// without a leader past the liveness bound (docs/development.md): a range
// with violations on the real code, to find the first of. -first-violation
// names the lowest broken seed whatever the number of workers, and every
// seed below it plays without a violation.
func TestFirstViolationIsTheLowestBrokenSeed(t *testing.T) {
	const start = 1
	trusting := []string{"-trusted-record-lease", "596523h14m7s", "-seed-start", strconv.Itoa(start), "-seeds", "300", "-first-violation"}
	found := regexp.MustCompile(`(?m)^first violation: seed (\d+), after (\d+) schedules`)
	var first int64
	for _, workers := range []string{"1", "4"} {
		var out, errs bytes.Buffer
		if code := run(append(trusting, "-workers", workers), &out, &errs); code != 1 {
			t.Fatalf("-workers %s: exit %d, want 1; stderr %s, stdout:\n%s", workers, code, errs.String(), out.String())
		}
		m := found.FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("-workers %s: no line %q in:\n%s", workers, found, out.String())
		}
		seed, _ := strconv.ParseInt(m[1], 10, 64)
		after, _ := strconv.ParseInt(m[2], 10, 64)
		if after != seed-start+1 {
			t.Fatalf("-workers %s: seed %d after %d schedules, want %d", workers, seed, after, seed-start+1)
		}
		if !strings.Contains(out.String(), "--- schedule "+m[1]+":") {
			t.Fatalf("-workers %s: the trace of schedule %s is not printed:\n%s", workers, m[1], out.String())
		}
		if first != 0 && seed != first {
			t.Fatalf("-workers %s: first violation at seed %d, with one worker at %d", workers, seed, first)
		}
		first = seed
	}
	for seed := int64(start); seed <= first; seed++ {
		r, err := sim.Run(sim.Options{Seed: seed, Duration: 3 * time.Minute, Candidates: 3, TrustedRecordLease: 596523*time.Hour + 14*time.Minute + 7*time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if broken := len(r.Violations) > 0; broken != (seed == first) {
			t.Fatalf("seed %d: %d violations; the first violation was reported at seed %d", seed, len(r.Violations), first)
		}
	}
}

// A range without a violation ends as it does without the flag.
func TestFirstViolationOnACleanRange(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-seeds", "50", "-first-violation"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d, want 0; stderr %s, stdout:\n%s", code, errs.String(), out.String())
	}
	if !strings.Contains(out.String(), "50 schedules, 0 violations") || strings.Contains(out.String(), "first violation") {
		t.Fatalf("want the usual last line and no first violation:\n%s", out.String())
	}
}

// The store's restarts and failovers are played when asked for, and their
// figures printed; a shard group refuses them.
func TestStoreFaultFlags(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-seeds", "20", "-store-restarts", "-failovers"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d, want 0; stderr %s, stdout:\n%s", code, errs.String(), out.String())
	}
	line := regexp.MustCompile(`(?m)^(\d+) store restarts; (\d+) failovers, losing (\d+) writes; \d+ tokens handed out twice`).FindStringSubmatch(out.String())
	if line == nil || line[1] == "0" || line[2] == "0" || line[3] == "0" {
		t.Fatalf("want restarts, failovers and lost writes counted:\n%s", out.String())
	}
	errs.Reset()
	if code := run([]string{"-seeds", "1", "-shards", "2", "-failovers"}, &out, &errs); code != 2 {
		t.Fatalf("-shards with -failovers: exit %d, want 2; stderr %s", code, errs.String())
	}
}
