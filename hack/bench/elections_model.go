package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// The budget of one API server the model is stated against: one CPU core
// (60 CPU seconds a minute) and 1 GiB of resident memory, for
// kube-apiserver and for etcd each.
const (
	budgetCPU    = 60.0   // CPU s/min
	budgetRSSMiB = 1024.0 // MiB
)

// linearFit is y = Base + PerElection·elections + PerReplica·(elections ×
// replicas), fitted by least squares. With one replica count the two
// slopes cannot be told apart: PerReplica is 0, PerElection is the cost of
// an election of that many replicas, and Replicas says which.
type linearFit struct {
	Base, PerElection, PerReplica float64
	Replicas                      int // > 0: fitted on this replica count only
	Points                        int
}

// at is the fitted value at e elections of r replicas.
func (f linearFit) at(e float64, r int) float64 {
	return f.Base + f.PerElection*e + f.PerReplica*e*float64(r)
}

// electionsAt is the number of elections of r replicas at which the fit
// reaches budget; -1 if it does not grow, -2 if its base is over the
// budget already.
func (f linearFit) electionsAt(budget float64, r int) float64 {
	slope := f.PerElection + f.PerReplica*float64(r)
	if slope <= 0 {
		return -1
	}
	if n := (budget - f.Base) / slope; n >= 0 {
		return n
	}
	return -2
}

// fitElections fits y over the points: on elections and candidates when
// the points have two replica counts and three sizes that tell them apart,
// else on elections alone when they share one replica count and have two
// election counts; ok is false when neither is possible.
func fitElections(es []electionsResult, y func(electionsResult) float64) (f linearFit, ok bool) {
	rows := make([][]float64, len(es))
	ys := make([]float64, len(es))
	replicas := map[int]bool{}
	counts := map[int]bool{}
	for i, e := range es {
		rows[i] = []float64{1, float64(e.Elections), float64(e.Elections * e.Replicas)}
		ys[i] = y(e)
		replicas[e.Replicas], counts[e.Elections] = true, true
	}
	if len(replicas) > 1 {
		if c, ok := leastSquares(rows, ys); ok {
			return linearFit{Base: c[0], PerElection: c[1], PerReplica: c[2], Points: len(es)}, true
		}
		return f, false
	}
	if len(counts) < 2 {
		return f, false
	}
	for i := range rows {
		rows[i] = rows[i][:2]
	}
	c, ok := leastSquares(rows, ys)
	if !ok {
		return f, false
	}
	return linearFit{Base: c[0], PerElection: c[1], Replicas: es[0].Replicas, Points: len(es)}, true
}

// leastSquares solves the normal equations of rows·c ≈ ys by Gaussian
// elimination with partial pivoting; ok is false when they are singular
// (the columns do not tell the coefficients apart).
func leastSquares(rows [][]float64, ys []float64) (c []float64, ok bool) {
	n := len(rows[0])
	if len(rows) < n {
		return nil, false
	}
	a := make([][]float64, n) // [AᵀA | Aᵀy]
	for i := range a {
		a[i] = make([]float64, n+1)
		for k, row := range rows {
			for j := range n {
				a[i][j] += row[i] * row[j]
			}
			a[i][n] += row[i] * ys[k]
		}
	}
	for col := range n {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[p][col]) {
				p = r
			}
		}
		if math.Abs(a[p][col]) < 1e-9*math.Max(1, math.Abs(a[0][0])) {
			return nil, false
		}
		a[col], a[p] = a[p], a[col]
		for r := range n {
			if r != col {
				k := a[r][col] / a[col][col]
				for j := col; j <= n; j++ {
					a[r][j] -= k * a[col][j]
				}
			}
		}
	}
	c = make([]float64, n)
	for i := range n {
		c[i] = a[i][n] / a[i][i]
	}
	return c, true
}

// modelMetric is one quantity the model fits, and the budget it is held
// against. The RSS is fitted on its growth since before the series' first
// candidate started, and its budget is what the server's RSS before then
// (idle) leaves of budgetRSSMiB.
type modelMetric struct {
	name, unit string
	budget     float64
	y          func(electionsResult) float64
	idle       func(electionsResult) float64 // nil: the budget is all for the candidates
}

var modelMetrics = []modelMetric{
	{"kube-apiserver CPU", "s/min", budgetCPU, func(e electionsResult) float64 { return perMinD(e.APIServer, e.Window) }, nil},
	{"kube-apiserver RSS growth", "MiB", budgetRSSMiB, func(e electionsResult) float64 { return mibOf(e.APIServerRSS - e.APIServerRSSBefore) },
		func(e electionsResult) float64 { return mibOf(e.APIServerRSSBefore) }},
	{"etcd CPU", "s/min", budgetCPU, func(e electionsResult) float64 { return perMinD(e.Etcd, e.Window) }, nil},
	{"etcd RSS growth", "MiB", budgetRSSMiB, func(e electionsResult) float64 { return mibOf(e.EtcdRSS - e.EtcdRSSBefore) },
		func(e electionsResult) float64 { return mibOf(e.EtcdRSSBefore) }},
}

// renderElectionsModel writes the model of the many-elections points: per
// system and renew setting, each server's CPU and memory fitted against
// elections and candidates, the number of elections at which each would
// reach the budget, and what the renew interval changes.
func renderElectionsModel(w *page, es []electionsResult) {
	type series struct{ sys, renew string }
	var order []series
	by := map[series][]electionsResult{}
	var replicas []int
	for _, e := range es {
		k := series{e.Sys, e.Renew}
		if by[k] == nil {
			order = append(order, k)
		}
		by[k] = append(by[k], e)
		if !slices.Contains(replicas, e.Replicas) {
			replicas = append(replicas, e.Replicas)
		}
	}
	slices.Sort(replicas)
	w.p("### Model\n\n")
	w.p("Computed from the points above by least squares, per system and renew setting: each quantity as *base* + *per election* × elections + *per replica* × (elections × replicas), ")
	w.p("so an election of R replicas adds *per election* + R × *per replica*; with one replica count measured, the two cannot be told apart and *per election* is that of an election of that many replicas. ")
	w.p("*Elections at budget*: where the line reaches one CPU core (%.0f CPU s/min) or %.0f MiB of RSS, for each number of replicas; ", budgetCPU, budgetRSSMiB)
	w.p("The RSS is fitted on its growth since before the series' first candidate started, and reaches the budget when that growth reaches what the idle server (its RSS then) leaves of it. ")
	w.p("An extrapolation of a straight line, as good as the range it was fitted on.\n\n")
	var reps []string
	for _, r := range replicas {
		reps = append(reps, fmt.Sprintf("× %d", r))
	}
	w.p("| system | renew | quantity | points | base | per election | per replica | elections at budget (%s) |\n|---|---|---|---|---|---|---|---|\n", strings.Join(reps, ", "))
	fitted := false
	for _, k := range order {
		for _, m := range modelMetrics {
			f, ok := fitElections(by[k], m.y)
			if !ok {
				continue
			}
			fitted = true
			perReplica := fmt.Sprintf("%.4g", f.PerReplica)
			if f.Replicas > 0 {
				perReplica = fmt.Sprintf("(× %d replicas only)", f.Replicas)
			}
			var at []string
			for _, r := range replicas {
				if f.Replicas > 0 && r != f.Replicas {
					at = append(at, "")
					continue
				}
				budget := m.budget
				if m.idle != nil {
					budget -= m.idle(by[k][0])
				}
				switch n := f.electionsAt(budget, r); {
				case n == -1:
					at = append(at, "does not grow")
				case n < 0:
					at = append(at, "over it already")
				default:
					at = append(at, fmt.Sprintf("%.0f", n))
				}
			}
			w.p("| %s | %s | %s, %s | %d | %.4g | %.4g | %s | %s |\n", k.sys, k.renew, m.name, m.unit, f.Points, f.Base, f.PerElection, perReplica, strings.Join(at, ", "))
		}
	}
	if !fitted {
		w.p("| | | no fit: it needs two election counts of one replica count, or three sizes over two replica counts | | | | | |\n")
	}
	w.p("\n")
	renderRenewKnob(w, es)
}

// renderRenewKnob compares the renew settings that were measured at the
// same sizes, and states the margin each leaves a leader that misses a
// renewal.
func renderRenewKnob(w *page, es []electionsResult) {
	type size struct {
		sys         string
		elec, repls int
	}
	var renews []string
	at := map[string]map[size]electionsResult{}
	for _, e := range es {
		renews = appendNew(renews, e.Renew)
		if at[e.Renew] == nil {
			at[e.Renew] = map[size]electionsResult{}
		}
		at[e.Renew][size{e.Sys, e.Elections, e.Replicas}] = e
	}
	prof := profileNamed(es[0].Prof)
	w.p("**The renew interval.** ")
	for _, rn := range renews {
		var iv time.Duration
		for _, e := range es {
			if e.Renew == rn && e.Sys == sysSidecar {
				iv = e.RenewInterval
			}
		}
		if iv == 0 {
			continue
		}
		left, retries := renewMargin(iv, prof)
		w.p("Renewing every %v (%s) with a %v lease, a leader that misses a renewal has %v before its Lease expires for the others, and %d retr%s (a jittered retry period of at most %v apart) before its renew deadline (%v). ",
			iv, rn, prof.Lease, left, retries, map[bool]string{true: "y", false: "ies"}[retries == 1], time.Duration(election.JitterFactor*float64(prof.Retry)), prof.Renew)
	}
	for i, a := range renews {
		for _, b := range renews[i+1:] {
			for _, sys := range []string{sysSidecar, sysClientGo} {
				var ra, rb, wa, wb float64
				n := 0
				for s, ea := range at[a] {
					eb, ok := at[b][s]
					if s.sys != sys || !ok {
						continue
					}
					ra, rb = ra+perSec(ea.Requests.total(), ea.Window), rb+perSec(eb.Requests.total(), eb.Window)
					wa, wb = wa+perSec(ea.Requests.Writes, ea.Window), wb+perSec(eb.Requests.Writes, eb.Window)
					n++
				}
				if n > 0 && ra > 0 && wa > 0 {
					w.p("%s, over the %d size%s measured at both: renewing at %s instead of %s takes %.2f× the requests and %.2f× the Lease writes. ",
						sys, n, map[bool]string{true: "", false: "s"}[n == 1], b, a, rb/ra, wb/wa)
				}
			}
		}
	}
	if len(renews) < 2 {
		w.p("One renew setting was measured: run with `-elections-renew default,1/2` to compare (the writes of a leader go as one over its renew interval).")
	}
	w.p("\n\n")
}

// profileNamed is the timings of the given name.
func profileNamed(name string) profile {
	if name == profShort.Name {
		return profShort
	}
	return profDefault
}
