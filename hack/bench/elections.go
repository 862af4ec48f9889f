package main

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/kubetest"
)

// electionsConfig sizes the many-elections measurement. A point is
// (elections, replicas, system, renew setting); the counts of one
// (replicas, system, renew setting) are measured in one series, in
// ascending order, each adding elections to those already running.
type electionsConfig struct {
	Counts   []int // elections on the one API server, ascending
	Replicas []int // candidates per election
	Renews   []renewSetting
	Window   time.Duration
	Trials   int // hand-offs of one election while the others run
	Profile  profile
	// FreshServer starts each series on an API server of its own, so that
	// the memory one series made kube-apiserver and etcd hold does not
	// carry into the next.
	FreshServer bool
	// MaxCandidates skips the points of more candidates (elections ×
	// replicas) than this, all processes at once on this machine; 0: no
	// limit.
	MaxCandidates int
}

// electionsResult is the cost of Elections elections of Replicas
// candidates of one system on one API server.
type electionsResult struct {
	Sys, Prof           string
	Renew               string        // the renew setting's name (renew.go)
	RenewInterval       time.Duration // sidecar: --renew-interval; client-go: its retry period, which is how often its leader renews
	Elections, Replicas int
	Window              time.Duration
	Requests            counts        // every candidate, over the window
	OpenWatches         int64         // watch requests open through the candidates' proxies at the end of the window
	APIServer, Etcd     time.Duration // CPU time over the window
	// VmRSS in KiB of kube-apiserver and etcd at the end of the window,
	// and before the series' first candidate started.
	APIServerRSS, EtcdRSS             int64
	APIServerRSSBefore, EtcdRSSBefore int64
	CandRSS                           []int64 // KiB, VmRSS of every candidate at the end of the window
	Handoffs                          []trial // election 0, while the others run
	OneLeader                         int     // sidecar: elections with exactly one leader:true answer after the window; -1: not asked
}

// measureElections: every replica count, renew setting and system, each a
// series of the election counts.
func measureElections(b *bench, res *results) error {
	for _, n := range b.cfg.Elections.Replicas {
		for _, rs := range b.cfg.Elections.Renews {
			for _, sys := range []string{sysSidecar, sysClientGo} {
				rr, err := b.electionSeries(sys, n, rs)
				res.Elections = append(res.Elections, rr...)
				if err != nil {
					return fmt.Errorf("%s x%d renew %s: %w", sys, n, rs.Name, err)
				}
			}
		}
	}
	return nil
}

// electionSeries starts the elections of each count in turn, adding to
// those already running: it waits until each has a leader, counts
// requests, open watches, API server and etcd CPU over the window, reads
// their memory and the candidates', then hands one election over again and
// again while the others run.
func (b *bench) electionSeries(sys string, replicas int, rs renewSetting) ([]electionsResult, error) {
	c := b.cfg.Elections
	prof, extra := rs.apply(sys, c.Profile)
	var groups []*group
	defer func() {
		var cs []*cand
		for _, g := range groups {
			cs = append(append(cs, g.leader), g.standbys...)
		}
		stopAll(cs)
	}()
	if c.FreshServer && b.seq.Load() > 0 { // a candidate has run on this one
		if err := b.freshAPIServer(); err != nil {
			return nil, err
		}
	}
	ns, err := b.namespace(fmt.Sprintf("elections-%s-%d-%s", sys, replicas, rs.slug()))
	if err != nil {
		return nil, err
	}
	apiBefore, etcdBefore, err := b.serverRSS()
	if err != nil {
		return nil, err
	}
	var out []electionsResult
	for _, count := range c.Counts {
		if c.MaxCandidates > 0 && count*replicas > c.MaxCandidates {
			b.logf("  elections %s %dx%d: skipped, more than %d candidates (-elections-max-candidates)", sys, count, replicas, c.MaxCandidates)
			continue
		}
		r := electionsResult{Sys: sys, Prof: c.Profile.Name, Renew: rs.Name, RenewInterval: rs.interval(sys, c.Profile), Elections: count,
			Replicas: replicas, Window: c.Window, OneLeader: -1, APIServerRSSBefore: apiBefore, EtcdRSSBefore: etcdBefore}
		if groups, err = b.startElections(groups, count, sys, replicas, prof, ns, extra); err != nil {
			return out, err
		}
		time.Sleep(max(settleTime(prof), r.RenewInterval+prof.Retry+time.Second))
		before, err := b.meter(groups)
		if err != nil {
			return out, err
		}
		time.Sleep(c.Window)
		after, err := b.meter(groups)
		if err != nil {
			return out, err
		}
		r.Requests, r.APIServer, r.Etcd = after.requests.sub(before.requests), after.apiServer-before.apiServer, after.etcd-before.etcd
		r.OpenWatches, r.APIServerRSS, r.EtcdRSS, r.CandRSS = after.openWatches, after.apiServerRSS, after.etcdRSS, after.candRSS
		if sys == sysSidecar {
			r.OneLeader = oneLeader(groups)
		}
		med, top := medianMax(r.CandRSS)
		b.logf("  elections %s %dx%d renew %s: %.1f req/s, %.1f writes/s, %d open watches, kube-apiserver %.1f s/min %.0f MiB, etcd %.1f s/min %.0f MiB, candidates %.1f / %.1f MiB",
			sys, count, replicas, rs.Name, perSec(r.Requests.total(), c.Window), perSec(r.Requests.Writes, c.Window), r.OpenWatches,
			perMinD(r.APIServer, c.Window), mibOf(r.APIServerRSS), perMinD(r.Etcd, c.Window), mibOf(r.EtcdRSS), mibOf(med), mibOf(top))
		r.Handoffs, err = b.trials(groups[0], syscall.SIGTERM, c.Trials)
		out = append(out, r)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// startElections starts the candidates of elections len(groups) to
// count-1 in namespace ns, waits until each serves and each of those
// elections has a leader, and returns every group. Only election 0's
// sidecars follow /leader/watch (its hand-offs are timed).
func (b *bench) startElections(groups []*group, count int, sys string, replicas int, prof profile, ns string, extra []string) ([]*group, error) {
	first := len(groups)
	for i := first; i < count; i++ {
		g := &group{sys: sys, backend: "lease", ns: ns, name: fmt.Sprintf("e%d", i), prof: prof, extra: extra}
		groups = append(groups, g)
		for range replicas {
			cand, err := b.spawn(sys, prof, "lease", ns, g.name, i == 0, extra...)
			if err != nil {
				return groups, err
			}
			g.standbys = append(g.standbys, cand)
		}
	}
	deadline := time.Now().Add(2*prof.Lease + time.Duration((count-first)*replicas)*time.Second)
	for _, g := range groups[first:] {
		for _, cand := range g.standbys {
			if err := cand.waitReady(time.Until(deadline)); err != nil {
				return groups, err
			}
		}
		if err := g.awaitLeader(time.Until(deadline)); err != nil {
			return groups, err
		}
	}
	return groups, nil
}

// awaitLeader waits until one candidate of g leads and makes it g's
// leader: a client-go candidate says so on stdout, a sidecar on /leader.
func (g *group) awaitLeader(within time.Duration) error {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for i, c := range g.standbys {
			leads := c.isLeading()
			if c.sys == sysSidecar {
				st, err := c.sidecar.Leader()
				leads = err == nil && st.Leader
			}
			if leads {
				g.leader = c
				g.standbys = append(g.standbys[:i:i], g.standbys[i+1:]...)
				return nil
			}
		}
	}
	return fmt.Errorf("election %s has no leader after %v", g.name, within)
}

// meterReading is the state of the counters at one instant.
type meterReading struct {
	requests              counts
	openWatches           int64
	apiServer, etcd       time.Duration
	apiServerRSS, etcdRSS int64   // KiB
	candRSS               []int64 // KiB, every candidate
}

func (b *bench) meter(groups []*group) (meterReading, error) {
	var m meterReading
	for _, g := range groups {
		for _, c := range append([]*cand{g.leader}, g.standbys...) {
			m.requests = m.requests.add(c.proxy.snapshot())
			m.openWatches += c.proxy.openWatches.Load()
			m.candRSS = append(m.candRSS, rssKiB(c.cmd.Process.Pid))
		}
	}
	apiPID, err := b.kube.APIServerPID()
	if err != nil {
		return m, err
	}
	etcdPID, err := b.kube.EtcdPID()
	if err != nil {
		return m, err
	}
	if m.apiServer, err = cpuTime(apiPID); err != nil {
		return m, err
	}
	if m.etcd, err = cpuTime(etcdPID); err != nil {
		return m, err
	}
	m.apiServerRSS, m.etcdRSS = rssKiB(apiPID), rssKiB(etcdPID)
	return m, nil
}

// serverRSS is the VmRSS of kube-apiserver and etcd, in KiB.
func (b *bench) serverRSS() (apiServer, etcd int64, err error) {
	apiPID, err := b.kube.APIServerPID()
	if err != nil {
		return 0, 0, err
	}
	etcdPID, err := b.kube.EtcdPID()
	if err != nil {
		return 0, 0, err
	}
	return rssKiB(apiPID), rssKiB(etcdPID), nil
}

// freshAPIServer starts a new kube-apiserver and etcd in place of the
// running ones, which it stops.
func (b *bench) freshAPIServer() error {
	b.logf("  starting a fresh kube-apiserver and etcd")
	fresh, err := kubetest.Start()
	if err != nil {
		return fmt.Errorf("starting envtest: %w", err)
	}
	old := b.kube
	b.kube = fresh
	return old.Stop()
}

// medianMax is the median and the largest of the readings that are not
// -1 (a process that had exited), or -1, -1 if there are none.
func medianMax(kib []int64) (median, top int64) {
	v := slices.DeleteFunc(slices.Clone(kib), func(n int64) bool { return n < 0 })
	if len(v) == 0 {
		return -1, -1
	}
	slices.Sort(v)
	return v[len(v)/2], v[len(v)-1]
}

func mibOf(kib int64) float64 { return float64(kib) / 1024 }

// oneLeader counts the elections in which exactly one sidecar answers
// leader:true.
func oneLeader(groups []*group) int {
	n := 0
	for _, g := range groups {
		leaders := 0
		for _, c := range append([]*cand{g.leader}, g.standbys...) {
			if st, err := c.sidecar.Leader(); err == nil && st.Leader {
				leaders++
			}
		}
		if leaders == 1 {
			n++
		}
	}
	return n
}

func perSec(n int64, w time.Duration) float64          { return float64(n) / w.Seconds() }
func perMinD(d time.Duration, w time.Duration) float64 { return d.Seconds() / w.Minutes() }

func renderElections(w *page, r *results) {
	if len(r.Elections) == 0 {
		return
	}
	first := r.Elections[0]
	var counts, replicas, renews []string
	for _, e := range r.Elections {
		counts = appendNew(counts, fmt.Sprint(e.Elections))
		replicas = appendNew(replicas, fmt.Sprint(e.Replicas))
		renews = appendNew(renews, e.Renew)
	}
	w.section("Many elections on one API server")
	w.p("%s elections side by side on the one API server, each of %s candidates of one system, ", strings.Join(counts, ", "), strings.Join(replicas, " or "))
	w.p("every candidate a process of its own behind its own counting proxy, %s timings; ", first.Prof)
	w.p("for each number of replicas, renew setting and system, the counts are one series, each adding elections to those already running. ")
	w.p("*Renew*: how often each leader renews its Lease: *default* is each system's own (the sidecar every lease/3, client-go every retry period); ")
	w.p("a fraction of the lease is the sidecar's `--renew-interval` and client-go's `--retry-period`, client-go's only renewal knob, which sets how often its standbys read the Lease too. ")
	w.p("Over a %s window after start-up: requests per second of all candidates together, of which Lease writes, ", first.Window)
	w.p("watch requests opened per second and open at the end of the window (counted in the proxies), the CPU time kube-apiserver and etcd used per minute ")
	w.p("(utime + stime from `/proc/<pid>/stat`), their resident memory (VmRSS from `/proc/<pid>/status`) at the end of the window and its growth since before the series' first candidate started, ")
	w.p("and the candidates' own VmRSS, median and largest. Then one election is handed over (SIGTERM to its leader) again and again while the others run. ")
	w.p("*One leader*: elections in which exactly one sidecar answered `leader: true` when asked after the window.\n\n")
	w.p("| system | renew | elections × replicas | requests/s | Lease writes/s | watches opened/s | open watches | kube-apiserver CPU s/min | etcd CPU s/min | kube-apiserver RSS MiB (growth) | etcd RSS MiB (growth) | candidate RSS MiB, median / max | hand-off p50 | hand-off p99 (trials) | one leader |\n")
	w.p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, e := range r.Elections {
		d := sorted(e.Handoffs, lat)
		p50, p99 := "", ""
		if len(d) > 0 {
			p50, p99 = ms(pct(d, 50)), fmt.Sprintf("%s (%d)", ms(pct(d, 99)), len(d))
		}
		one := ""
		if e.OneLeader >= 0 {
			one = fmt.Sprintf("%d / %d", e.OneLeader, e.Elections)
		}
		med, top := medianMax(e.CandRSS)
		w.p("| %s | %s (%s) | %d × %d | %.1f | %.2f | %.2f | %d | %.2f | %.2f | %.0f (%+.0f) | %.0f (%+.0f) | %.1f / %.1f | %s | %s | %s |\n",
			e.Sys, e.Renew, e.RenewInterval, e.Elections, e.Replicas,
			perSec(e.Requests.total(), e.Window), perSec(e.Requests.Writes, e.Window), perSec(e.Requests.Watches, e.Window), e.OpenWatches,
			perMinD(e.APIServer, e.Window), perMinD(e.Etcd, e.Window),
			mibOf(e.APIServerRSS), mibOf(e.APIServerRSS-e.APIServerRSSBefore), mibOf(e.EtcdRSS), mibOf(e.EtcdRSS-e.EtcdRSSBefore),
			mibOf(med), mibOf(top), p50, p99, one)
	}
	w.p("\n![many elections](%s)\n\n", electionsPlot)
	renderElectionsModel(w, r.Elections)
}
