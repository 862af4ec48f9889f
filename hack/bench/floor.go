package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Each latency the bench reports beside its floor: the least code that
// does the same work, measured in the same run on the same machine
// (floor_sqlite.go, floor_lease.go, floor_postgres.go).
const (
	floorLeaseHandoff     = "lease hand-off"
	floorSQLiteHandoff    = "sqlite hand-off"
	floorFailover         = "fail-over beyond the lease"
	floorPostgresHandoff  = "postgres hand-off"
	floorPostgresFailover = "postgres fail-over beyond the lease"

	// floorRatioTarget: the SQLite hand-off p99 target, and the ratio above
	// which the page shows where the time goes.
	floorRatioTarget = 1.5
)

// step is one instant of a trial, measured from its start (the signal,
// or for a fail-over the end of the lease).
type step struct {
	Name string
	At   time.Duration
}

func stepsString(steps []step) string {
	var parts []string
	for _, s := range steps {
		parts = append(parts, fmt.Sprintf("%s %v", s.Name, s.At.Round(10*time.Microsecond)))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// The sidecar's log lines that mark the steps of a takeover, in order,
// and whose log (the old leader's or the new one's) has them. A graceful
// stop with a standby running hands off (pkg/election: offer, accept,
// transfer) instead of releasing.
var sidecarStepLines = []struct {
	msg, name string
	newLeader bool
}{
	{"offering leadership", "offer committed", false},
	{"accepted a hand-off; leading once the leader transfers the record", "accept committed", true},
	{"stopped leading", "leader stopped claiming", false},
	{"handed leadership off", "transfer committed", false},
	{"released the lease", "release committed", false},
	{"leader changed: released, nobody leads", "standby read the release", true},
	{"became leader", "acquire committed", true},
}

// sidecarSteps reads the instants of a takeover from the JSON logs of the
// old leader and the new one (times in nanoseconds), measured from base,
// in the order they happened; the last step is the moment the bench saw
// the new leader's /leader/watch event. With -log-level debug the new
// leader's log also shows when its last wait for the record to expire
// was to end (when it first saw the record's last version, plus the
// lease duration) and when it decided to acquire.
func sidecarSteps(old, next *cand, base time.Time, reported time.Duration) []step {
	var steps []step
	oldLog, newLog := logEntries(old.sidecar.Logs()), logEntries(next.sidecar.Logs())
	for _, l := range sidecarStepLines {
		entries := oldLog
		if l.newLeader {
			entries = newLog
		}
		if e, ok := firstEntry(entries, base, func(e logEntry) bool { return e.Msg == l.msg }); ok {
			steps = append(steps, step{l.name, e.Time.Sub(base)})
		}
	}
	var expiry, decided time.Time
	for _, e := range newLog {
		if e.Msg == "became leader" {
			break
		}
		if e.Msg == "decided" && e.Action == "wait" && !e.Until.IsZero() {
			expiry = e.Until
		}
		if e.Msg == "decided" && e.Action == "acquire" && !e.Time.Before(base.Add(-time.Millisecond)) {
			decided = e.Time
		}
	}
	// Before base, it is stale: the standby saw a later version by its
	// watch, which logs no decision.
	if !expiry.IsZero() && !expiry.Before(base) {
		steps = append(steps, step{"expiry as the standby counts it", expiry.Sub(base)})
	}
	if !decided.IsZero() {
		steps = append(steps, step{"acquire decided", decided.Sub(base)})
	}
	steps = append(steps, step{"bench saw the event", reported})
	slices.SortStableFunc(steps, func(a, b step) int { return int(a.At - b.At) })
	return steps
}

// logEntry is what the steps need of one JSON log line.
type logEntry struct {
	Time, Until time.Time
	Msg, Action string
}

func logEntries(logs string) []logEntry {
	var out []logEntry
	for _, line := range strings.Split(logs, "\n") {
		var e logEntry
		if json.Unmarshal([]byte(line), &e) == nil && !e.Time.IsZero() {
			out = append(out, e)
		}
	}
	return out
}

// firstEntry is the first entry that matches, logged at or after since
// (less a millisecond, for clocks read apart).
func firstEntry(entries []logEntry, since time.Time, match func(logEntry) bool) (logEntry, bool) {
	for _, e := range entries {
		if match(e) && !e.Time.Before(since.Add(-time.Millisecond)) {
			return e, true
		}
	}
	return logEntry{}, false
}

// floorSection is the number of the floors' section on the page: after
// the hand-off's and the fail-over's.
func floorSection(r *results) int {
	n := 1
	if len(r.Handoff) > 0 {
		n++
	}
	if len(r.Failover) > 0 {
		n++
	}
	return n
}

// floorRow is one latency beside its floor.
type floorRow struct {
	latency, prof string
	sidecar       []trial
	floor         []trial
	f             func(trial) time.Duration
}

func floorRows(r *results) []floorRow {
	var rows []floorRow
	for _, pr := range []profile{profDefault, profShort} {
		rows = append(rows,
			floorRow{floorLeaseHandoff, pr.Name, r.Handoff[key(sysSidecar, pr, "lease")], r.Floor[floorLeaseHandoff], lat},
			floorRow{floorSQLiteHandoff, pr.Name, r.Handoff[key(sysSidecar, pr, "sqlite")], r.Floor[floorSQLiteHandoff], lat},
			floorRow{floorFailover, pr.Name, r.Failover[key(sysSidecar, pr, "lease")], r.Floor[floorFailover], beyond},
			floorRow{floorPostgresHandoff, pr.Name, r.Handoff[key(sysSidecar, pr, "postgres")], r.Floor[floorPostgresHandoff], lat},
			floorRow{floorPostgresFailover, pr.Name, r.Failover[key(sysSidecar, pr, "postgres")], r.Floor[floorPostgresFailover], beyond})
	}
	return slices.DeleteFunc(rows, func(f floorRow) bool { return len(f.sidecar) == 0 || len(f.floor) == 0 })
}

// p99Ratio is the sidecar's p99 over the floor's.
func (f floorRow) p99Ratio() float64 {
	s, fl := sorted(f.sidecar, f.f), sorted(f.floor, f.f)
	return float64(pct(s, 99)) / float64(max(pct(fl, 99), time.Microsecond))
}

func renderFloors(w *page, r *results) {
	rows := floorRows(r)
	if len(rows) == 0 {
		return
	}
	w.section("Each latency beside its floor")
	w.p("The floor of a latency is the least code that does the same work, measured in the same run on the same machine, ")
	w.p("each trial after the same random pause as a hand-off trial with the short timings (the floor does not depend on the timings):\n\n")
	w.p("- **SQLite hand-off**: one process commits the release (a compare-and-swap of one row, on a connection opened with `sqlite.WriterDSN`, ")
	w.p("the backend's own settings for a release: WAL, `BEGIN IMMEDIATE`, `synchronous=NORMAL`) when the bench asks it on a pipe (the sidecar gets SIGTERM); ")
	w.p("the bench process learns of the commit by the sidecar's own mechanism (the inotify watch of the directory reports the write to the `-wal`, ")
	w.p("then `PRAGMA data_version` is read every millisecond until it changes), reads the row and commits the acquire ")
	w.p("(a compare-and-swap with the backend's settings for a write that names a holder: `synchronous=FULL`). Ends when the acquire has committed.\n")
	w.p("- **Lease hand-off**: two clients (client-go's typed client, no `leaderelection` package) in the bench process, each behind a counting proxy of its own ")
	w.p("as every candidate is, each with a watch of the Lease open: the leader's release (an update with the resourceVersion it wrote last), ")
	w.p("the watch event reaching the other client, and its acquire (an update with the event's resourceVersion). Ends when the acquire returns.\n")
	w.p("- **Crash fail-over beyond the lease**: the same two clients; the leader renews, the renewal reaches the other client by its watch, ")
	w.p("and after a pause (a real standby waits out the lease duration there) it takes the Lease with one update: ")
	w.p("time from the renewal's `renewTime` to its watch event, plus the update.\n")
	w.p("- **PostgreSQL hand-off**: two connections (pgx) in the bench process to the same server, with `synchronous_commit=on` as the backend's writes, ")
	w.p("on a one-row table of its own whose trigger calls `pg_notify` after each write, as the backend's does; the other connection LISTENs. ")
	w.p("The first commits the release (an `UPDATE` that compares the version and bumps it); the other receives the notification, reads the row ")
	w.p("and commits the acquire (an `UPDATE` from the version it read). Ends when the acquire has committed.\n")
	w.p("- **PostgreSQL fail-over beyond the lease**: the same two connections; the first renews (an `UPDATE` of the version and `renew_time`), ")
	w.p("the other receives the notification and reads the row, and after a pause (a real standby waits out the lease duration there) ")
	w.p("takes the row with one compare-and-swap: time from the renewal's `renew_time` to the row read, plus the compare-and-swap.\n\n")
	w.p("The sidecar's figures end later than the floors': when the bench sees the new leader's `leader: true` event on its `/leader/watch`, ")
	w.p("which is what an application learns; the floors end when the acquire is written.\n\n")
	w.p("| latency | timings | sidecar trials | sidecar p50 | sidecar p99 | floor trials | floor p50 | floor p99 | sidecar ÷ floor p50 | sidecar ÷ floor p99 |\n")
	w.p("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range rows {
		s, fl := sorted(f.sidecar, f.f), sorted(f.floor, f.f)
		w.p("| %s | %s | %d | %s | %s | %d | %s | %s | %s | **%s** |\n", f.latency, f.prof, len(s), ms(pct(s, 50)), ms(pct(s, 99)),
			len(fl), ms(pct(fl, 50)), ms(pct(fl, 99)), ratio(float64(pct(s, 50)), float64(pct(fl, 50))), ratio(float64(pct(s, 99)), float64(pct(fl, 99))))
	}
	w.p("\n")
	renderWhereTheTimeGoes(w, rows)
}

// renderWhereTheTimeGoes shows, for each latency whose p99 is above
// floorRatioTarget times its floor's, the steps of the sidecar's slowest
// trials and of the floor's, each as the time since the previous step.
func renderWhereTheTimeGoes(w *page, rows []floorRow) {
	var slow []floorRow
	for _, f := range rows {
		if f.p99Ratio() > floorRatioTarget {
			slow = append(slow, f)
		}
	}
	if len(slow) == 0 {
		return
	}
	w.p("### Where the time goes\n\n")
	w.p("Where the sidecar's p99 is above %.1f× its floor's: the slowest trials of each (those at or above the p90), ", floorRatioTarget)
	w.p("each step as the time since the previous one. The sidecar's steps are the times of its own JSON log lines ")
	w.p("(`offering leadership`, `stopped leading`, `handed leadership off` or `released the lease` on the old leader; ")
	w.p("`accepted a hand-off`, `leader changed: released, nobody leads` and `became leader` on the new one); ")
	w.p("a fail-over's are measured from the end of the lease (last `renewTime` + lease duration).\n\n")
	for _, f := range slow {
		for _, who := range []struct {
			name   string
			trials []trial
		}{{"leader-sidecar", f.sidecar}, {"floor", f.floor}} {
			ts := slices.Clone(who.trials)
			slices.SortFunc(ts, func(a, b trial) int { return int(f.f(b) - f.f(a)) })
			ts = ts[:max(1, len(ts)-len(ts)*90/100)]
			w.p("- %s, %s timings, %s (%d slowest of %d)%s:\n", f.latency, f.prof, who.name, len(ts), len(who.trials), largestLeg(ts))
			for _, t := range ts {
				w.p("  - %s: %s\n", ms(f.f(t)), legs(t.Steps))
			}
		}
		w.p("\n")
	}
}

// largestLeg names the step that took the most of the trials' time, all
// together, and its share.
func largestLeg(ts []trial) string {
	sum := map[string]time.Duration{}
	var total time.Duration
	for _, t := range ts {
		var prev time.Duration
		for _, s := range t.Steps {
			sum[s.Name] += s.At - prev
			total += s.At - prev
			prev = s.At
		}
	}
	var name string
	for n, d := range sum {
		if name == "" || d > sum[name] || d == sum[name] && n < name {
			name = n
		}
	}
	if name == "" || total <= 0 {
		return ""
	}
	return fmt.Sprintf(": most of their time until *%s* (%.0f%%)", name, 100*float64(sum[name])/float64(total))
}

// legs writes steps as the time each took since the one before.
func legs(steps []step) string {
	var parts []string
	var prev time.Duration
	for _, s := range steps {
		parts = append(parts, fmt.Sprintf("%s +%s", s.Name, ms(s.At-prev)))
		prev = s.At
	}
	if len(parts) == 0 {
		return "(no steps recorded)"
	}
	return strings.Join(parts, ", ")
}

// targetsFloor: the SQLite hand-off p99 within floorRatioTarget of its
// floor's p99.
func targetsFloor(w *page, r *results) {
	for _, f := range floorRows(r) {
		if f.latency != floorSQLiteHandoff {
			continue
		}
		s, fl := sorted(f.sidecar, f.f), sorted(f.floor, f.f)
		w.p("| graceful hand-off p99 within %.1f× its floor's p99, SQLite, %s timings (sidecar / floor) | %s / %s (%s) | | %s |\n",
			floorRatioTarget, f.prof, ms(pct(s, 99)), ms(pct(fl, 99)), ratio(float64(pct(s, 99)), float64(pct(fl, 99))), met(f.p99Ratio() <= floorRatioTarget))
	}
}
