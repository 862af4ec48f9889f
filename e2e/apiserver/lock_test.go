package apiserver

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// sidecar lock as a process: each CMD is a shell script that appends what
// it does to a sidecartest.Journal shared by every run of the test, and the
// test reads the journal's lines in order.

// lockArgs are the arguments of sidecar lock with the test timings, JSON
// logs at level info (the "serving" line names the app API's address) and
// the app API on a free loopback port (so the sweeps can ask it), then
// args, then -- sh -c script.
func lockArgs(script string, args ...string) []string {
	base := append([]string{"lock", "--http-address", "127.0.0.1:0", "--log-format", "json", "--log-level", "info"}, sidecartest.TimingArgs()...)
	return append(append(base, args...), "--", "sh", "-c", script)
}

// startLock starts sidecar lock on the environment env (plus PATH) and
// waits until it serves its app API.
func startLock(t *testing.T, env []string, script string, args ...string) *sidecartest.Sidecar {
	t.Helper()
	cmd := exec.Command(sidecartest.Binary(t), lockArgs(script, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	s := sidecartest.Track(t, cmd)
	s.WaitServing()
	return s
}

// runsInTurn starts one sidecar lock per entry of runs (each its env and
// args) at once, each CMD journalling "start", working for a while and
// journalling "end", and sweeps every lock's /leader until all have exited.
// Every lock must exit 0; no two terms may claim at once; the CMDs must run
// one after another, each with the token after the one before, each
// starting within a lease duration of the last one's end (the release
// hands over, nobody waits the lease out). It returns the journal.
func runsInTurn(t *testing.T, runs []lockRun) []sidecartest.Entry {
	t.Helper()
	j := sidecartest.NewJournal(t)
	script := j.Line("start") + "; sleep 0.7; " + j.Line("end")
	var set sidecartest.Members
	var log sidecartest.ClaimLog
	var locks []*sidecartest.Sidecar
	for i, r := range runs {
		s := startLock(t, r.env, script, r.args...)
		locks = append(locks, s)
		set.Add(fmt.Sprintf("lock-%d", i), s, 0)
	}
	halt := log.SweepUntilHalted(sidecartest.SweepEvery, set.All)
	defer halt()
	for i, s := range locks {
		if code := s.WaitExit(time.Duration(len(runs)) * 10 * time.Second); code != 0 {
			t.Fatalf("lock-%d: exit status %d, want CMD's 0:\n%s", i, code, s.Logs())
		}
	}
	halt()
	terms := log.Check(t)

	entries := j.Entries(t)
	if len(entries) != 2*len(runs) {
		t.Fatalf("journal %v: want a start and an end per run", entries)
	}
	var gaps []time.Duration
	for i := 0; i < len(entries); i += 2 {
		start, end := entries[i], entries[i+1]
		if start.Word != "start" || end.Word != "end" || start.Token != end.Token || start.Pid != end.Pid {
			t.Fatalf("journal %v: CMDs overlapped (line %d)", entries, i)
		}
		if i > 0 {
			prev := entries[i-1]
			if start.Token != prev.Token+1 {
				t.Fatalf("journal %v: token %d after %d, want the next", entries, start.Token, prev.Token)
			}
			gap := start.At.Sub(prev.At)
			if gap > sidecartest.LeaseDuration {
				t.Fatalf("journal %v: CMD started %v after the last one ended: the lease was waited out, not released", entries, gap)
			}
			gaps = append(gaps, gap.Round(time.Millisecond))
		}
	}
	if len(terms) != len(runs) {
		t.Fatalf("the sweeps saw the terms %v, want %d", terms, len(runs))
	}
	t.Logf("%d runs in turn, tokens %d..%d; gaps from one CMD's end to the next one's start %v; %d sweeps every %v, %d answers, claims per term %v, overlaps 0",
		len(runs), entries[0].Token, entries[len(entries)-1].Token, gaps, log.Sweeps(), sidecartest.SweepEvery, log.Asked(), terms)
	return entries
}

// lockRun is one sidecar lock of runsInTurn.
type lockRun struct {
	env  []string
	args []string
}

func TestLockRunsTakeTurnsOnSQLite(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	run := lockRun{args: []string{"--sqlite-path", db}}
	runsInTurn(t, []lockRun{run, run, run})
}

// The exit status is CMD's, 128+n when signal n killed it. The runs go
// one after another on one file: each released, so each starts at once.
func TestLockExitsWithTheCommandsStatus(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"exit 0", []string{"--", "true"}, 0},
		{"exit 3", []string{"--", "sh", "-c", "exit 3"}, 3},
		{"killed by SIGKILL", []string{"--", "sh", "-c", "kill -KILL $$"}, 128 + 9},
		{"killed by SIGTERM", []string{"--", "sh", "-c", "kill -TERM $$"}, 128 + 15},
		{"no CMD", []string{"--"}, 2},
		{"CMD not found", []string{"--", "no-such-command-here"}, 127},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			began := time.Now()
			code, out, _ := sidecartest.RunLock(t, db, c.args...)
			if code != c.code {
				t.Fatalf("exit status %d, want %d:\n%s", code, c.code, out)
			}
			if took := time.Since(began); took > sidecartest.LeaseDuration {
				t.Fatalf("took %v: it waited for the lease of the run before", took)
			}
		})
	}
}

// SIGTERM or SIGINT to sidecar lock reaches CMD, which exits as it likes;
// then the lock releases and another lock's CMD starts at once.
func TestLockPassesSignalsOnThenReleases(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			db := sidecartest.DBPath(t)
			j := sidecartest.NewJournal(t)
			first := startLock(t, nil, fmt.Sprintf("trap '%s; exit 4' TERM INT; %s; while :; do sleep 0.05; done",
				j.Line("caught"), j.Line("start")), "--sqlite-path", db)
			started := j.Await(t, "start", 10*time.Second)
			second := startLock(t, nil, j.Line("next"), "--sqlite-path", db)
			var set sidecartest.Members
			set.Add("first", first, 0)
			set.Add("second", second, 0)
			var log sidecartest.ClaimLog
			halt := log.SweepUntilHalted(sidecartest.SweepEvery, set.All)
			defer halt()
			time.Sleep(300 * time.Millisecond)

			caught, next := j.SignalAndAwaitNext(t, first, second, sig)
			halt()
			terms := log.Check(t)
			if caught.Token != started.Token || next.Token != started.Token+1 || next.At.Before(caught.At) {
				t.Fatalf("journal %v: want the signal caught in the first term, then the next term", j.Entries(t))
			}
			if gap := next.At.Sub(caught.At); gap > sidecartest.LeaseDuration {
				t.Fatalf("the next CMD started %v after the first caught the signal: no release", gap)
			}
			t.Logf("%v caught by CMD; the next CMD started %v later; claims per term %v, overlaps 0",
				sig, next.At.Sub(caught.At).Round(time.Millisecond), terms)
		})
	}
}

// A lock still waiting to lead when it gets SIGTERM runs nothing and exits
// 128+15; the leading lock is not disturbed.
func TestLockSignalledBeforeLeadingRunsNothing(t *testing.T) {
	t.Parallel()
	db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
	first := startLock(t, nil, j.Line("first")+"; sleep 1", "--sqlite-path", db)
	j.Await(t, "first", 10*time.Second)
	waiting := startLock(t, nil, j.Line("waiting"), "--sqlite-path", db)
	if st, err := waiting.Leader(); err != nil || st.Leader {
		t.Fatalf("the second lock leads or does not answer: %+v %v", st, err)
	}
	waiting.Signal(syscall.SIGTERM)
	if code := waiting.WaitExit(10 * time.Second); code != 128+15 {
		t.Fatalf("exit status %d, want 143:\n%s", code, waiting.Logs())
	}
	if code := first.WaitExit(10 * time.Second); code != 0 {
		t.Fatalf("the leading lock: exit status %d", code)
	}
	for _, e := range j.Entries(t) {
		if e.Word == "waiting" {
			t.Fatalf("the signalled lock ran its command: %v", j.Entries(t))
		}
	}
}
