package main

import (
	"fmt"
	"syscall"
)

// measureHandoff: graceful hand-offs on a Lease, both systems, each
// profile.
func measureHandoff(b *bench, res *results) error {
	for _, p := range b.profiles() {
		for _, sys := range []string{sysSidecar, sysClientGo} {
			t, err := b.takeovers(sys, p, "lease", syscall.SIGTERM, b.cfg.Trials)
			if err != nil {
				return fmt.Errorf("%s %s: %w", sys, p.Name, err)
			}
			res.Handoff[key(sys, p, "lease")] = t
		}
	}
	t, err := b.leaseFloor(b.cfg.Trials, false)
	res.Floor[floorLeaseHandoff] = t
	return err
}

// measureHandoffSQLite: the sidecar's graceful hand-offs on one SQLite
// file (no API server), each profile.
func measureHandoffSQLite(b *bench, res *results) error {
	for _, p := range b.profiles() {
		t, err := b.takeovers(sysSidecar, p, "sqlite", syscall.SIGTERM, b.cfg.SQLiteTrials)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		res.Handoff[key(sysSidecar, p, "sqlite")] = t
	}
	t, err := b.sqliteFloor(b.cfg.SQLiteTrials)
	res.Floor[floorSQLiteHandoff] = t
	return err
}

// measureHandoffPostgres: the sidecar's graceful hand-offs on one
// PostgreSQL server (no API server), each profile.
func measureHandoffPostgres(b *bench, res *results) error {
	for _, p := range b.profiles() {
		t, err := b.takeovers(sysSidecar, p, "postgres", syscall.SIGTERM, b.cfg.PostgresTrials)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		res.Handoff[key(sysSidecar, p, "postgres")] = t
	}
	t, err := b.pgFloor(b.cfg.PostgresTrials, false)
	res.Floor[floorPostgresHandoff] = t
	return err
}

// profiles are the timings of a run: both, or the short ones in a smoke run.
func (b *bench) profiles() []profile {
	if b.cfg.Smoke {
		return []profile{profShort}
	}
	return []profile{profDefault, profShort}
}

func renderHandoff(w *page, r *results) {
	if len(r.Handoff) == 0 {
		return
	}
	w.section("Graceful hand-off")
	w.p("SIGTERM to the leader → the standby reports leadership (leader-sidecar: the `leader: true` event on the standby's ")
	w.p("`/leader/watch`; client-go: `OnStartedLeading` prints a line on stdout). Each trial waits a random 0.2–2.2× retry period first, so SIGTERM falls ")
	w.p("at a random phase of the standby's polls and the leader's renewals.\n\n")
	w.p("| timings | backend | system | trials | p50 | p90 | p99 | max | client-go ÷ sidecar (p50 / p99) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, pr := range []profile{profDefault, profShort} {
		for _, be := range []string{"lease", "sqlite", "postgres"} {
			for _, sys := range []string{sysSidecar, sysClientGo} {
				ts := r.Handoff[key(sys, pr, be)]
				if len(ts) == 0 {
					continue
				}
				d := sorted(ts, lat)
				rat := ""
				if s := sorted(r.Handoff[key(sysSidecar, pr, be)], lat); sys == sysClientGo && len(s) > 0 {
					rat = ratio(float64(pct(d, 50)), float64(pct(s, 50))) + " / " + ratio(float64(pct(d, 99)), float64(pct(s, 99)))
				}
				w.p("| %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", pr.Name, be, sys, len(d), ms(pct(d, 50)), ms(pct(d, 90)), ms(pct(d, 99)), ms(d[len(d)-1]), rat)
			}
		}
	}
	w.p("\n![hand-off latency](%s)\n\n", handoffPlot)
}
