package main

import (
	"fmt"
	"strings"
	"time"
)

// footprint is the resident memory of an idle leader and standby: all of
// it (RSS), the part no other process shares (private: anonymous memory
// and the binary's pages only this process maps), and the anonymous part
// (heap, stacks, runtime; the rest of the RSS is file-backed). The
// binary's text and read-only data, most of the RSS, are file pages that
// every process of the same binary on a node shares.
type footprint struct {
	Prof                          string
	Idle                          time.Duration
	LeaderRSS, StandbyRSS         int64 // KiB
	LeaderPrivate, StandbyPrivate int64 // KiB
	LeaderAnon, StandbyAnon       int64 // KiB; 0 in results saved before they were measured
}

// footprintKey is where Footprint keeps a system's figures on a backend.
func footprintKey(sys, backend string) string {
	if backend == "lease" {
		return sys
	}
	return sys + "/" + backend
}

// measureFootprint runs a leader and a standby of each system on a Lease,
// and of the sidecar on SQLite, with the default timings (config.IdleTimings),
// lets them idle, and reads their memory.
func measureFootprint(b *bench, res *results) error {
	for _, run := range []struct{ sys, backend string }{{sysSidecar, "lease"}, {sysClientGo, "lease"}, {sysSidecar, "sqlite"}} {
		sys, key := run.sys, footprintKey(run.sys, run.backend)
		ns, err := b.namespace("footprint-" + strings.ReplaceAll(key, "/", "-"))
		if err != nil {
			return err
		}
		prof := b.cfg.idleTimings()
		g, err := b.newPair(sys, prof, run.backend, ns, "bench")
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		err = settled(g.standbys[0], prof)
		if err == nil {
			time.Sleep(b.cfg.Idle)
			leader, standby := g.leader.cmd.Process.Pid, g.standbys[0].cmd.Process.Pid
			f := footprint{Prof: prof.Name, Idle: b.cfg.Idle,
				LeaderRSS: rssKiB(leader), StandbyRSS: rssKiB(standby),
				LeaderPrivate: privateKiB(leader), StandbyPrivate: privateKiB(standby),
				LeaderAnon: anonKiB(leader), StandbyAnon: anonKiB(standby)}
			res.Footprint[key] = f
			b.logf("  %s idle RSS: leader %s, standby %s; private: leader %s, standby %s; anonymous: leader %s, standby %s",
				key, mib(f.LeaderRSS), mib(f.StandbyRSS), mib(f.LeaderPrivate), mib(f.StandbyPrivate), mib(f.LeaderAnon), mib(f.StandbyAnon))
		}
		g.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// anonPlusFile writes an RSS as its anonymous and file-backed parts.
func anonPlusFile(rss, anon int64) string {
	return fmt.Sprintf("%.1f + %.1f MiB", float64(anon)/1024, float64(rss-anon)/1024)
}

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
		if s.LeaderPrivate > 0 {
			w.p("| private memory (not shared with other processes of the binary), idle leader / standby | %s / %s | %s / %s | %s |\n",
				mib(s.LeaderPrivate), mib(s.StandbyPrivate), mib(g.LeaderPrivate), mib(g.StandbyPrivate), ratio(float64(g.StandbyPrivate), float64(s.StandbyPrivate)))
		}
		if s.LeaderAnon > 0 {
			w.p("| RSS split, idle leader / standby: anonymous (heap, stacks, runtime) + file-backed (the binary's pages) | %s / %s | %s / %s | |\n",
				anonPlusFile(s.LeaderRSS, s.LeaderAnon), anonPlusFile(s.StandbyRSS, s.StandbyAnon), anonPlusFile(g.LeaderRSS, g.LeaderAnon), anonPlusFile(g.StandbyRSS, g.StandbyAnon))
		}
		if q := r.Footprint[footprintKey(sysSidecar, "sqlite")]; q.Prof != "" {
			w.p("| RSS on SQLite, idle leader / standby (private) | %s / %s (%s / %s) | (no SQLite) | |\n",
				mib(q.LeaderRSS), mib(q.StandbyRSS), mib(q.LeaderPrivate), mib(q.StandbyPrivate))
			if q.LeaderAnon > 0 {
				w.p("| RSS split on SQLite, idle leader / standby: anonymous + file-backed | %s / %s | | |\n",
					anonPlusFile(q.LeaderRSS, q.LeaderAnon), anonPlusFile(q.StandbyRSS, q.StandbyAnon))
			}
		}
	}
	w.p("| binary size (`-trimpath -ldflags='-s -w'`, CGO off) | %s | %s | %s |\n", mib(r.BinSize[sysSidecar]/1024), mib(r.BinSize[sysClientGo]/1024), ratio(float64(r.BinSize[sysClientGo]), float64(r.BinSize[sysSidecar])))
	if st := r.Startup[sysSidecar]; st.Lead > 0 {
		w.p("| process start → first answer on `/leader` | %s | (no API) | |\n", ms(st.FirstAnswer))
		timings := ""
		if st.Prof != "" && st.Prof != profDefault.Name {
			timings = fmt.Sprintf(" (%s timings)", st.Prof)
		}
		w.p("| process start → leads on a free Lease%s | %s | %s | |\n", timings, ms(st.Lead), ms(r.Startup[sysClientGo].Lead))
	}
	w.p("\nThe client-go candidate is a minimal `main` around `leaderelection.RunOrDie`'s elector (`hack/bench/clientgo`); a real controller links far more. ")
	w.p("Start-up times are single samples and include the counting proxy.\n\n")
	w.p("Where an idle replica's memory goes, and what was cut: [footprint.md](footprint.md).\n\n")
}
