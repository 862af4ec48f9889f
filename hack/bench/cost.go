package main

import (
	"fmt"
	"sync"
	"time"
)

// costResult is the API server cost of one leader and n standbys.
type costResult struct {
	Sys                   string
	Prof                  string
	Standbys              int
	Window                time.Duration
	Leader                counts
	StandbyOne            counts // the first standby
	StandbysAll           counts
	LeaderRSS, StandbyRSS int64
}

func perMin(n int64, w time.Duration) float64 { return float64(n) / w.Minutes() }

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
	defer func() {
		var wg sync.WaitGroup
		for _, s := range standbys {
			wg.Go(s.stop)
		}
		wg.Wait()
	}()
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
	// Let start-up requests (discovery, the first list and watch) pass.
	time.Sleep(max(3*time.Second, 2*prof.Retry))
	snap := func() (l, one, sum counts) {
		l = leader.proxy.snapshot()
		for i, s := range standbys {
			c := s.proxy.snapshot()
			if i == 0 {
				one = c
			}
			sum = counts{sum.Reads + c.Reads, sum.Writes + c.Writes, sum.Watches + c.Watches}
		}
		return
	}
	l0, o0, s0 := snap()
	time.Sleep(window)
	l1, o1, s1 := snap()
	r.Leader, r.StandbyOne, r.StandbysAll = l1.sub(l0), o1.sub(o0), s1.sub(s0)
	r.LeaderRSS, r.StandbyRSS = rssKiB(leader.cmd.Process.Pid), rssKiB(standbys[0].cmd.Process.Pid)
	b.logf("  cost %s %s standbys=%d: leader %.1f/min, one standby %.1f/min, all standbys %.1f/min",
		sys, prof.Name, n, perMin(r.Leader.total(), window), perMin(r.StandbyOne.total(), window), perMin(r.StandbysAll.total(), window))
	return r, nil
}
