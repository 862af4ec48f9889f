package main

import (
	"fmt"
	"syscall"
)

// measureFailover: crash fail-overs (SIGKILL) on a Lease, both systems,
// the short profile and (unless -crash-trials-default 0) the default one.
func measureFailover(b *bench, res *results) error {
	for _, p := range []profile{profShort, profDefault} {
		n := b.cfg.CrashTrials
		if p == profDefault {
			n = b.cfg.CrashDefault
		}
		if n == 0 {
			continue
		}
		for _, sys := range []string{sysSidecar, sysClientGo} {
			t, err := b.takeovers(sys, p, "lease", syscall.SIGKILL, n)
			if err != nil {
				return fmt.Errorf("%s %s: %w", sys, p.Name, err)
			}
			res.Failover[key(sys, p, "lease")] = t
		}
	}
	t, err := b.leaseFloor(max(b.cfg.CrashTrials, b.cfg.CrashDefault), true)
	res.Floor[floorFailover] = t
	return err
}

// measureFailoverPostgres: the sidecar's crash fail-overs (SIGKILL) on
// one PostgreSQL server, the profiles as measureFailover's; client-go has
// no PostgreSQL.
func measureFailoverPostgres(b *bench, res *results) error {
	for _, p := range []profile{profShort, profDefault} {
		n := b.cfg.CrashTrials
		if p == profDefault {
			n = b.cfg.CrashDefault
		}
		if n == 0 {
			continue
		}
		t, err := b.takeovers(sysSidecar, p, "postgres", syscall.SIGKILL, n)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		res.Failover[key(sysSidecar, p, "postgres")] = t
	}
	t, err := b.pgFloor(max(b.cfg.CrashTrials, b.cfg.CrashDefault), true)
	res.Floor[floorPostgresFailover] = t
	return err
}

func renderFailover(w *page, r *results) {
	if len(r.Failover) == 0 {
		return
	}
	w.section("Crash fail-over")
	w.p("SIGKILL to the leader → the standby reports leadership. *Beyond lease* is the takeover time minus ")
	w.p("(the leader's last `renewTime` on the Lease, or `renew_time` in the PostgreSQL row, + lease duration): the wait above the unavoidable one. ")
	w.p("(The whole latency can be shorter than the lease duration, because the last renewal happened before the kill.)\n\n")
	w.p("| timings | backend | system | trials | latency p50 | latency p99 | beyond lease p50 | p90 | p99 | max |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, pr := range []profile{profShort, profDefault} {
		for _, be := range []string{"lease", "postgres"} {
			for _, sys := range []string{sysSidecar, sysClientGo} {
				ts := r.Failover[key(sys, pr, be)]
				if len(ts) == 0 {
					continue
				}
				d, b := sorted(ts, lat), sorted(ts, beyond)
				w.p("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", pr.Name, be, sys, len(ts), ms(pct(d, 50)), ms(pct(d, 99)), ms(pct(b, 50)), ms(pct(b, 90)), ms(pct(b, 99)), ms(b[len(b)-1]))
			}
		}
	}
	w.p("\n![fail-over beyond the lease duration](%s)\n\n", failoverPlot)
}
