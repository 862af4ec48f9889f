//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkRollouts rolls out the example chart's Pods many times (2, 3
// and 5 replicas; the Deployment under the default RollingUpdate and under
// maxSurge 0 / maxUnavailable 1, and a StatefulSet) with the sidecars as
// issue 38 left them ("after": the chart's defaults) and as before it
// ("before": no deletion cost, no revision known), and a StatefulSet whose
// sidecars await their replacement (after only), every Pod sampled
// every 100 ms, and prints a markdown table of what each cell did:
// moves of leadership per rollout (the Lease's token after less before),
// the longest leaderless stretch the samples saw, and rounds of samples
// with two leaders. Not part of make test-cluster, which runs no
// benchmarks: make bench-rollouts (docs/benchmarks.md, "Rollouts on the
// one-node cluster"). Run it with -benchtime 1x: a cell is one run of its
// LEADER_SIDECAR_ROLLOUTS rollouts (default 10), whatever b.N; -bench
// selects cells, e.g. 'Rollouts/replicas=3/' or 'Rollouts/.*/StatefulSet/'.
// Cells run one at a time, each in a namespace of its own.
func BenchmarkRollouts(b *testing.B) {
	rollouts := 10
	if v := os.Getenv("LEADER_SIDECAR_ROLLOUTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("LEADER_SIDECAR_ROLLOUTS=%q: want a whole number of rollouts, at least 1", v)
		}
		rollouts = n
	}
	var cells []rolloutCell
	for _, replicas := range []int{2, 3, 5} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			for _, w := range []workload{deploymentDefault, deploymentMaxSurge0, statefulSet, statefulSetAwaiting} {
				b.Run(w.name, func(b *testing.B) {
					modes := []sidecarMode{beforeIssue38, afterIssue38}
					if w.awaitsReplacement { // an option of the "after" sidecars
						modes = modes[1:]
					}
					for _, mode := range modes {
						b.Run(string(mode), func(b *testing.B) {
							c := measureRollouts(b, w, replicas, mode, rollouts)
							cells = append(cells, c)
							b.ReportMetric(c.meanMoves(), "moves/rollout")
							b.ReportMetric(float64(c.longestLeaderless().Milliseconds()), "max-leaderless-ms")
							b.ReportMetric(float64(c.twoLeaderRounds()), "two-leader-rounds")
						})
					}
				})
			}
		})
	}
	if len(cells) > 0 {
		fmt.Print(rolloutTable(cells))
	}
}

// rolloutCell is one cell of the benchmark: its rollouts in order.
type rolloutCell struct {
	replicas int
	w        workload
	mode     sidecarMode
	rollouts []rollout
}

// measureRollouts installs the chart as w with replicas Pods in mode and
// rolls it out n times.
func measureRollouts(b *testing.B, w workload, replicas int, mode sidecarMode, n int) rolloutCell {
	// A rollout of 5 replicas takes about a minute on the one-node
	// cluster; this is a bound for a stuck one, not an expectation.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute+time.Duration(n)*4*time.Minute)
	defer cancel()
	ns := cl.namespace(b)
	w.install(b, ctx, ns, replicas, mode)
	c := rolloutCell{replicas: replicas, w: w, mode: mode}
	for round := 1; round <= n; round++ {
		r := w.rollOut(b, ctx, ns, replicas, round)
		b.Logf("rollout %d: %d moves (token %d → %d, leader before %s), rolled out in %v, longest leaderless %v, %d rounds with two leaders, %d late claims of an older term; leaders in turn %q",
			round, r.moves(), r.before, r.after, r.leaderBefore, r.rolled.Round(time.Millisecond), r.leaderless,
			r.twoLeaderRounds, r.lateOlderClaims, r.seen)
		c.rollouts = append(c.rollouts, r)
	}
	return c
}

func (c rolloutCell) meanMoves() float64 {
	total := 0
	for _, r := range c.rollouts {
		total += r.moves()
	}
	return float64(total) / float64(len(c.rollouts))
}

func (c rolloutCell) longestLeaderless() time.Duration {
	var longest time.Duration
	for _, r := range c.rollouts {
		longest = max(longest, r.leaderless)
	}
	return longest
}

func (c rolloutCell) twoLeaderRounds() int {
	n := 0
	for _, r := range c.rollouts {
		n += r.twoLeaderRounds
	}
	return n
}

// rolloutTable is the markdown table of the cells, one row each. "From the
// highest ordinal" counts a StatefulSet's rollouts that began with the
// leader on the Pod it replaces first, which move leadership twice even
// with the new revision preferred, unless the leader awaits its
// replacement (wantMoves).
func rolloutTable(cells []rolloutCell) string {
	var sb strings.Builder
	sb.WriteString("| replicas | strategy | mode | rollouts | moves per rollout (mean, max) | rollouts with more than one move | from the highest ordinal | longest leaderless (max) | rounds with two leaders | late claims of an older term |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cells {
		most, several, highest, late := 0, 0, 0, 0
		for _, r := range c.rollouts {
			most = max(most, r.moves())
			if r.moves() > 1 {
				several++
			}
			if c.w.startsOnHighest(r.leaderBefore, c.replicas) {
				highest++
			}
			late += r.lateOlderClaims
		}
		fromHighest := "–"
		if c.w.statefulSet {
			fromHighest = strconv.Itoa(highest)
		}
		fmt.Fprintf(&sb, "| %d | %s | %s | %d | %.2f, %d | %d | %s | %v | %d | %d |\n",
			c.replicas, c.w.name, c.mode, len(c.rollouts), c.meanMoves(), most, several, fromHighest,
			c.longestLeaderless().Round(time.Millisecond), c.twoLeaderRounds(), late)
	}
	return sb.String()
}
