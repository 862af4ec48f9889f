package main

import (
	"fmt"
	"strings"
	"syscall"
	"time"
)

// electionsConfig sizes the many-elections measurement.
type electionsConfig struct {
	Count    int   // elections on the one API server
	Replicas []int // candidates per election, one run each
	Window   time.Duration
	Trials   int // hand-offs of one election while the others run
	Profile  profile
}

// electionsResult is the cost of Count elections of Replicas candidates
// of one system on one API server.
type electionsResult struct {
	Sys, Prof           string
	Elections, Replicas int
	Window              time.Duration
	Requests            counts        // every candidate, over the window
	APIServer, Etcd     time.Duration // CPU time over the window
	Handoffs            []trial       // election 0, while the others run
	OneLeader           int           // sidecar: elections with exactly one leader:true answer after the window; -1: not asked
}

// measureElections: every replica count, both systems.
func measureElections(b *bench, res *results) error {
	for _, n := range b.cfg.Elections.Replicas {
		for _, sys := range []string{sysSidecar, sysClientGo} {
			r, err := b.elections(sys, n)
			if err != nil {
				return fmt.Errorf("%s x%d: %w", sys, n, err)
			}
			res.Elections = append(res.Elections, r)
		}
	}
	return nil
}

// elections starts the elections, waits until each has a leader, counts
// requests and API server and etcd CPU over the window, then hands one
// election over again and again while the others run.
func (b *bench) elections(sys string, replicas int) (electionsResult, error) {
	c := b.cfg.Elections
	r := electionsResult{Sys: sys, Prof: c.Profile.Name, Elections: c.Count, Replicas: replicas, Window: c.Window, OneLeader: -1}
	groups, err := b.startElections(sys, replicas)
	defer func() {
		var cs []*cand
		for _, g := range groups {
			cs = append(append(cs, g.leader), g.standbys...)
		}
		stopAll(cs)
	}()
	if err != nil {
		return r, err
	}
	time.Sleep(settleTime(c.Profile))
	before, err := b.meter(groups)
	if err != nil {
		return r, err
	}
	time.Sleep(c.Window)
	after, err := b.meter(groups)
	if err != nil {
		return r, err
	}
	r.Requests, r.APIServer, r.Etcd = after.requests.sub(before.requests), after.apiServer-before.apiServer, after.etcd-before.etcd
	if sys == sysSidecar {
		r.OneLeader = oneLeader(groups)
	}
	b.logf("  elections %s %dx%d: %.1f req/s, %.1f writes/s, kube-apiserver %.1f s/min, etcd %.1f s/min", sys, c.Count, replicas,
		perSec(r.Requests.total(), c.Window), perSec(r.Requests.Writes, c.Window), perMinD(r.APIServer, c.Window), perMinD(r.Etcd, c.Window))
	r.Handoffs, err = b.trials(groups[0], syscall.SIGTERM, c.Trials)
	return r, err
}

// startElections starts every candidate, waits until each serves and each
// election has a leader, and sorts the candidates into groups. Only
// election 0's sidecars follow /leader/watch (its hand-offs are timed).
func (b *bench) startElections(sys string, replicas int) ([]*group, error) {
	c := b.cfg.Elections
	ns, err := b.namespace(fmt.Sprintf("elections-%s-%d", sys, replicas))
	if err != nil {
		return nil, err
	}
	groups := make([]*group, c.Count)
	var everyone [][]*cand
	for i := range groups {
		var cs []*cand
		for range replicas {
			cand, err := b.spawn(sys, c.Profile, "lease", ns, fmt.Sprintf("e%d", i), i == 0)
			if err != nil {
				return groups, err
			}
			cs = append(cs, cand)
		}
		everyone = append(everyone, cs)
		groups[i] = &group{sys: sys, backend: "lease", ns: ns, name: fmt.Sprintf("e%d", i), prof: c.Profile, standbys: cs}
	}
	deadline := time.Now().Add(2*c.Profile.Lease + time.Duration(c.Count*replicas)*time.Second)
	for _, g := range groups {
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
	requests        counts
	apiServer, etcd time.Duration
}

func (b *bench) meter(groups []*group) (meterReading, error) {
	var m meterReading
	for _, g := range groups {
		for _, c := range append([]*cand{g.leader}, g.standbys...) {
			m.requests = m.requests.add(c.proxy.snapshot())
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
	m.etcd, err = cpuTime(etcdPID)
	return m, err
}

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
	var replicas []string
	for _, e := range r.Elections {
		replicas = appendNew(replicas, fmt.Sprint(e.Replicas))
	}
	w.section("Many elections on one API server")
	w.p("%d elections side by side on the one API server, each of %s candidates of one system, ", first.Elections, strings.Join(replicas, " or "))
	w.p("every candidate a process of its own behind its own counting proxy, %s timings. Over a %s window after start-up: ", first.Prof, first.Window)
	w.p("requests per second of all candidates together, of which Lease writes, and the CPU time kube-apiserver and etcd used per minute ")
	w.p("(utime + stime from `/proc/<pid>/stat`). Then one election is handed over (SIGTERM to its leader) again and again while the others run. ")
	w.p("*One leader*: elections in which exactly one sidecar answered `leader: true` when asked after the window.\n\n")
	w.p("| system | elections × replicas | requests/s | Lease writes/s | watches opened/s | kube-apiserver CPU s/min | etcd CPU s/min | hand-off p50 | hand-off p99 (trials) | one leader |\n")
	w.p("|---|---|---|---|---|---|---|---|---|---|\n")
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
		w.p("| %s | %d × %d | %.1f | %.2f | %.2f | %.2f | %.2f | %s | %s | %s |\n", e.Sys, e.Elections, e.Replicas,
			perSec(e.Requests.total(), e.Window), perSec(e.Requests.Writes, e.Window), perSec(e.Requests.Watches, e.Window),
			perMinD(e.APIServer, e.Window), perMinD(e.Etcd, e.Window), p50, p99, one)
	}
	w.p("\n![many elections](%s)\n\n", electionsPlot)
}
