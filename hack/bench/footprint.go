package main

import (
	"fmt"
	"time"
)

// footprint is the resident memory of an idle leader and standby.
type footprint struct {
	Prof                  string
	Idle                  time.Duration
	LeaderRSS, StandbyRSS int64 // KiB
}

// measureFootprint runs a leader and a standby of each system on a Lease
// with the default timings, lets them idle, and reads their VmRSS.
func measureFootprint(b *bench, res *results) error {
	for _, sys := range []string{sysSidecar, sysClientGo} {
		ns, err := b.namespace("footprint-" + sys)
		if err != nil {
			return err
		}
		g, err := b.newPair(sys, profDefault, "lease", ns, "bench")
		if err != nil {
			return fmt.Errorf("%s: %w", sys, err)
		}
		err = settled(g.standbys[0], profDefault)
		if err == nil {
			time.Sleep(b.cfg.Idle)
			f := footprint{Prof: profDefault.Name, Idle: b.cfg.Idle,
				LeaderRSS: rssKiB(g.leader.cmd.Process.Pid), StandbyRSS: rssKiB(g.standbys[0].cmd.Process.Pid)}
			res.Footprint[sys] = f
			b.logf("  %s idle RSS: leader %s, standby %s", sys, mib(f.LeaderRSS), mib(f.StandbyRSS))
		}
		g.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", sys, err)
		}
	}
	return nil
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func renderFootprint(w *page, r *results) {
	s, g := r.Footprint[sysSidecar], r.Footprint[sysClientGo]
	if s.Prof == "" && r.Startup[sysSidecar].Lead == 0 {
		return
	}
	w.section("Footprint")
	w.p("| | leader-sidecar | client-go candidate | client-go ÷ sidecar |\n|---|---|---|---|\n")
	if s.Prof != "" {
		w.p("| RSS, idle leader (%s timings, Lease, 1 standby, after %s) | %s | %s | %s |\n", s.Prof, s.Idle, mib(s.LeaderRSS), mib(g.LeaderRSS), ratio(float64(g.LeaderRSS), float64(s.LeaderRSS)))
		w.p("| RSS, idle standby | %s | %s | %s |\n", mib(s.StandbyRSS), mib(g.StandbyRSS), ratio(float64(g.StandbyRSS), float64(s.StandbyRSS)))
	}
	w.p("| binary size (`-trimpath -ldflags='-s -w'`, CGO off) | %s | %s | %s |\n", mib(r.BinSize[sysSidecar]/1024), mib(r.BinSize[sysClientGo]/1024), ratio(float64(r.BinSize[sysClientGo]), float64(r.BinSize[sysSidecar])))
	if st := r.Startup[sysSidecar]; st.Lead > 0 {
		w.p("| process start → first answer on `/leader` | %s | (no API) | |\n", ms(st.FirstAnswer))
		w.p("| process start → leads on a free Lease | %s | %s | |\n", ms(st.Lead), ms(r.Startup[sysClientGo].Lead))
	}
	w.p("\nThe client-go candidate is a minimal `main` around `leaderelection.RunOrDie`'s elector (`hack/bench/clientgo`); a real controller links far more. ")
	w.p("Start-up times are single samples and include the counting proxy.\n\n")
}
