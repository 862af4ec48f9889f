package main

import (
	"slices"
	"time"
)

// Targets of issue 13 and earlier ones.
const (
	handoffTarget      = 200 * time.Millisecond // graceful hand-off p99, Lease, default timings
	failoverTarget     = 100 * time.Millisecond // p99 beyond the lease duration
	leaderWritesTarget = 12                     // per minute, default timings
	rssTarget          = 21 * 1024              // KiB, idle leader and standby
	rssGoal            = 16 * 1024              // KiB, idle leader and standby on both backends (issue 26)
	binaryTarget       = 25 << 20               // bytes, stripped
)

func met(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

// renderTargets lists each target whose measurement ran, with the
// measured value and client-go's from the same run.
func renderTargets(w *page, r *results) {
	w.p("## Targets\n\n| target | leader-sidecar | client-go | |\n|---|---|---|---|\n")
	targetsLatency(w, r)
	targetsCost(w, r)
	targetsElections(w, r)
	if tv, sd := r.Load["trivial"], r.Load["sidecar"]; tv.RPS > 0 {
		w.p("| `/leader` ≥ 80%% of a trivial handler's throughput | %.0f%% | | %s |\n", 100*sd.RPS/tv.RPS, met(sd.RPS >= 0.8*tv.RPS))
	}
	if s, g := r.Footprint[sysSidecar], r.Footprint[sysClientGo]; s.Prof != "" {
		w.p("| idle RSS ≤ %s, leader / standby | %s / %s | %s / %s | %s |\n", mib(rssTarget), mib(s.LeaderRSS), mib(s.StandbyRSS),
			mib(g.LeaderRSS), mib(g.StandbyRSS), met(s.LeaderRSS <= rssTarget && s.StandbyRSS <= rssTarget))
		if q := r.Footprint[footprintKey(sysSidecar, "sqlite")]; q.Prof != "" {
			w.p("| idle RSS ≤ %s on both backends, leader / standby ([why not](footprint.md#why-16-mib-is-not-reached)) | Lease %s / %s, SQLite %s / %s | | %s |\n",
				mib(rssGoal), mib(s.LeaderRSS), mib(s.StandbyRSS), mib(q.LeaderRSS), mib(q.StandbyRSS),
				met(max(s.LeaderRSS, s.StandbyRSS, q.LeaderRSS, q.StandbyRSS) <= rssGoal))
		}
	}
	if n := r.BinSize[sysSidecar]; n > 0 {
		w.p("| stripped binary ≤ %s | %s | %s | %s |\n", mib(binaryTarget/1024), mib(n/1024), mib(r.BinSize[sysClientGo]/1024), met(n <= binaryTarget))
	}
	w.p("\n")
}

func targetsLatency(w *page, r *results) {
	if d := sorted(r.Handoff[key(sysSidecar, profDefault, "lease")], lat); len(d) > 0 {
		g := sorted(r.Handoff[key(sysClientGo, profDefault, "lease")], lat)
		w.p("| graceful hand-off p99 < %s, Lease, default timings | %s | %s | %s |\n", ms(handoffTarget), ms(pct(d, 99)), ms(pct(g, 99)), met(pct(d, 99) < handoffTarget))
	}
	targetsFloor(w, r)
	for _, pr := range []profile{profDefault, profShort} {
		if b := sorted(r.Failover[key(sysSidecar, pr, "lease")], beyond); len(b) > 0 {
			g := sorted(r.Failover[key(sysClientGo, pr, "lease")], beyond)
			w.p("| crash fail-over p99 within %s past the lease duration (%s timings, %d trials) | %s | %s | %s |\n", ms(failoverTarget), pr.Name, len(b), ms(pct(b, 99)), ms(pct(g, 99)), met(pct(b, 99) <= failoverTarget))
		}
	}
}

func targetsCost(w *page, r *results) {
	order, rows := costRows(r)
	var one, most costResult
	for _, k := range order {
		s, g := rows[k][sysSidecar], rows[k][sysClientGo]
		if k.n == 1 {
			w.p("| idle standby: no write, ~0 requests/min (%s timings) | %.1f req/min, %.1f writes/min | %.1f req/min | %s |\n", k.prof,
				perMin(s.StandbyOne.total(), s.Window), perMin(s.StandbyOne.Writes, s.Window), perMin(g.StandbyOne.total(), g.Window),
				met(s.StandbyOne.Writes == 0 && perMin(s.StandbyOne.total(), s.Window) < 1))
		}
		if k.prof == profDefault.Name && k.n == 1 {
			one = s
			w.p("| leader writes/min ≤ %d (default timings) | %.1f | %.1f | %s |\n", leaderWritesTarget, perMin(s.Leader.Writes, s.Window),
				perMin(g.Leader.Writes, g.Window), met(perMin(s.Leader.Writes, s.Window) <= leaderWritesTarget))
		}
		if k.prof == profDefault.Name && k.n > most.Standbys {
			most = s
		}
	}
	if one.Window > 0 && most.Standbys > 1 {
		t1, tn := perMin(one.Leader.total()+one.StandbysAll.total(), one.Window), perMin(most.Leader.total()+most.StandbysAll.total(), most.Window)
		w.p("| %d standbys cost about what 1 does (default timings, req/min) | %.1f vs %.1f | | %s |\n", most.Standbys, tn, t1, met(tn <= t1*1.2+1))
	}
}

// targetsElections: the sidecar's cost grows with the number of leaders,
// not of replicas: at the largest election count measured with the fewest
// and the most replicas, at the first renew setting.
func targetsElections(w *page, r *results) {
	if len(r.Elections) == 0 {
		return
	}
	renew := r.Elections[0].Renew
	type size struct{ elec, repls int }
	at := map[string]map[size]electionsResult{sysSidecar: {}, sysClientGo: {}}
	counts := map[int][]int{} // elections → replica counts measured for both systems
	for _, e := range r.Elections {
		if e.Renew == renew {
			at[e.Sys][size{e.Elections, e.Replicas}] = e
		}
	}
	best := 0
	for s := range at[sysSidecar] {
		if _, ok := at[sysClientGo][s]; ok {
			counts[s.elec] = append(counts[s.elec], s.repls)
			if len(counts[s.elec]) > 1 && s.elec > best {
				best = s.elec
			}
		}
	}
	if best > 0 {
		lo, hi := slices.Min(counts[best]), slices.Max(counts[best])
		s0, s1 := at[sysSidecar][size{best, lo}], at[sysSidecar][size{best, hi}]
		g0, g1 := at[sysClientGo][size{best, lo}], at[sysClientGo][size{best, hi}]
		a, b := perSec(s0.Requests.total(), s0.Window), perSec(s1.Requests.total(), s1.Window)
		ga, gb := perSec(g0.Requests.total(), g0.Window), perSec(g1.Requests.total(), g1.Window)
		w.p("| %d elections: cost grows with leaders, not replicas (req/s, %d → %d replicas) | %.1f → %.1f | %.1f → %.1f | %s |\n",
			best, lo, hi, a, b, ga, gb, met(b <= a*1.1+0.5))
	}
	for _, e := range r.Elections {
		if e.Sys == sysSidecar && e.OneLeader >= 0 {
			w.p("| %d × %d sidecars (renew %s): exactly one leader per election | %d / %d | | %s |\n", e.Elections, e.Replicas, e.Renew, e.OneLeader, e.Elections, met(e.OneLeader == e.Elections))
		}
	}
}
