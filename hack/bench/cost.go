package main

import (
	"fmt"
	"time"
)

// costResult is the API server cost of one leader and n standbys.
type costResult struct {
	Sys         string
	Prof        string
	Standbys    int
	Window      time.Duration
	Leader      counts
	StandbyOne  counts // the first standby
	StandbysAll counts
}

func perMin(n int64, w time.Duration) float64 { return float64(n) / w.Minutes() }

// settleTime is how long start-up requests take to pass: a sidecar reads
// the Lease and opens its watch, then a standby polls every retry period
// until its watch has shown it a renewal, at most a renew interval (a third
// of the lease) later; client-go reads once at start.
func settleTime(prof profile) time.Duration {
	return max(3*time.Second, 2*prof.Retry, prof.Lease/3+prof.Retry+time.Second)
}

// measureCost: requests of one leader and 1..N standbys, each profile.
func measureCost(b *bench, res *results) error {
	for _, pn := range b.cfg.CostProfiles {
		p, w := profShort, max(b.cfg.CostWindow/3, 5*time.Second)
		if pn == "default" {
			p, w = profDefault, b.cfg.CostWindow
		}
		if b.cfg.Smoke {
			w = b.cfg.CostWindow
		}
		for _, n := range b.cfg.Standbys {
			for _, sys := range []string{sysSidecar, sysClientGo} {
				r, err := b.cost(sys, p, n, w)
				if err != nil {
					return fmt.Errorf("%s %s %d: %w", sys, p.Name, n, err)
				}
				res.Cost = append(res.Cost, r)
			}
		}
	}
	return nil
}

func (b *bench) cost(sys string, prof profile, n int, window time.Duration) (costResult, error) {
	r := costResult{Sys: sys, Prof: prof.Name, Standbys: n, Window: window}
	ns, err := b.namespace(fmt.Sprintf("cost-%s-%s-%d", sys, prof.Name, n))
	if err != nil {
		return r, err
	}
	leader, err := b.spawn(sys, prof, "lease", ns, "bench", true)
	if err != nil {
		return r, err
	}
	defer leader.stop()
	if err := leader.waitLeading(2*prof.Lease + 30*time.Second); err != nil {
		return r, err
	}
	var standbys []*cand
	defer func() { stopAll(standbys) }()
	for i := 0; i < n; i++ {
		s, err := b.spawn(sys, prof, "lease", ns, "bench", false)
		if err != nil {
			return r, err
		}
		standbys = append(standbys, s)
	}
	for _, s := range standbys {
		if err := s.waitReady(60 * time.Second); err != nil {
			return r, err
		}
	}
	time.Sleep(settleTime(prof))
	l0, o0, s0 := snapshot(leader, standbys)
	time.Sleep(window)
	l1, o1, s1 := snapshot(leader, standbys)
	r.Leader, r.StandbyOne, r.StandbysAll = l1.sub(l0), o1.sub(o0), s1.sub(s0)
	b.logf("  cost %s %s standbys=%d: leader %.1f/min, one standby %.1f/min, all standbys %.1f/min",
		sys, prof.Name, n, perMin(r.Leader.total(), window), perMin(r.StandbyOne.total(), window), perMin(r.StandbysAll.total(), window))
	return r, nil
}

// snapshot reads the proxies' counters: the leader's, the first
// standby's, and the sum over the standbys.
func snapshot(leader *cand, standbys []*cand) (l, one, sum counts) {
	l = leader.proxy.snapshot()
	for i, s := range standbys {
		c := s.proxy.snapshot()
		if i == 0 {
			one = c
		}
		sum = sum.add(c)
	}
	return l, one, sum
}

// costKey is one row of the cost tables.
type costKey struct {
	prof string
	n    int
}

// costRows groups the cost results by row, in the order they were made.
func costRows(r *results) (order []costKey, rows map[costKey]map[string]costResult) {
	rows = map[costKey]map[string]costResult{}
	for _, cr := range r.Cost {
		k := costKey{cr.Prof, cr.Standbys}
		if rows[k] == nil {
			rows[k] = map[string]costResult{}
			order = append(order, k)
		}
		rows[k][cr.Sys] = cr
	}
	return order, rows
}

func renderCost(w *page, r *results) {
	order, rows := costRows(r)
	if len(order) == 0 {
		return
	}
	f := func(n int64, w time.Duration) string { return fmt.Sprintf("%.1f", perMin(n, w)) }
	w.section("API server cost of one election")
	w.p("Requests per minute seen by each candidate's proxy over the window, after start-up has passed (a sidecar's first read and its watch, ")
	w.p("and a standby's reads every retry period until its watch has shown it a renewal: at most a renew interval). ")
	w.p("A watch counts once when it is opened; the events it carries are not requests.\n\n")
	w.p("| timings | standbys | window | sidecar leader | sidecar one standby | sidecar all standbys | sidecar total | client-go leader | client-go one standby | client-go all standbys | client-go total | client-go ÷ sidecar (total) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range order {
		s, g := rows[k][sysSidecar], rows[k][sysClientGo]
		st, gt := s.Leader.total()+s.StandbysAll.total(), g.Leader.total()+g.StandbysAll.total()
		w.p("| %s | %d | %s | %s | %s | %s | **%s** | %s | %s | %s | **%s** | %s |\n", k.prof, k.n, s.Window,
			f(s.Leader.total(), s.Window), f(s.StandbyOne.total(), s.Window), f(s.StandbysAll.total(), s.Window), f(st, s.Window),
			f(g.Leader.total(), g.Window), f(g.StandbyOne.total(), g.Window), f(g.StandbysAll.total(), g.Window), f(gt, g.Window),
			ratio(perMin(gt, g.Window), perMin(st, s.Window)))
	}
	w.p("\nWrites per minute in the same windows (the part etcd has to persist). The sidecar's leader renews once per renew interval ")
	w.p("(a third of the lease duration), client-go's once per retry period:\n\n")
	w.p("| timings | standbys | sidecar leader | sidecar all standbys | client-go leader | client-go all standbys |\n|---|---|---|---|---|---|\n")
	for _, k := range order {
		s, g := rows[k][sysSidecar], rows[k][sysClientGo]
		w.p("| %s | %d | %s | %s | %s | %s |\n", k.prof, k.n, f(s.Leader.Writes, s.Window), f(s.StandbysAll.Writes, s.Window), f(g.Leader.Writes, g.Window), f(g.StandbysAll.Writes, g.Window))
	}
	w.p("\n")
}
