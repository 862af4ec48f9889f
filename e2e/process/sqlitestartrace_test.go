package process

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
)

// startRaceLosses are the two ways the file is lost under starting
// sidecars: deleted with its -wal and -shm, or another database (other)
// renamed over it after its -wal and -shm were removed, as the docs say to
// replace it.
var startRaceLosses = []struct {
	name string
	lose func(t *testing.T, path, other string) error
}{
	{"deleted", func(_ *testing.T, path, _ string) error { return sidecartest.RemoveDatabase(path) }},
	{"replaced", func(_ *testing.T, path, other string) error {
		for _, p := range []string{path + "-wal", path + "-shm"} {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return os.Rename(other, path)
	}},
}

// lastLine is the last line of logs.
func lastLine(logs string) string {
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	return lines[len(lines)-1]
}

// makeReleasedDatabase makes an election database at path whose record was
// released at token.
func makeReleasedDatabase(t *testing.T, path string, token int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := sqlite.Open(ctx, sqlite.Options{Path: path, Election: "leader-sidecar"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, backend.Record{LeaseDurationSeconds: 3, Transitions: token}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// The rounds of TestSQLiteFileLostWhileCandidatesStart.
const (
	// amidStartsBudget is about how long the test runs rounds, in waves
	// of amidStartsWave rounds at once (at most -parallel of them).
	amidStartsBudget = 35 * time.Second
	amidStartsWave   = 2
	// amidStartsStarters sidecars are launched up to amidStartsLaunchGap
	// apart; the file is lost up to amidStartsLossDelay after the first or
	// the second of them opens it.
	amidStartsStarters  = 3
	amidStartsLaunchGap = 5 * time.Millisecond
	amidStartsLossDelay = 6 * time.Millisecond
	// amidStartsSweepEvery is how often every sidecar is asked GET /leader.
	amidStartsSweepEvery = 5 * time.Millisecond
	// amidStartsSeedEnv names the variable that replays one round by its
	// seed.
	amidStartsSeedEnv = "SQLITE_LOSS_RACE_SEED"
)

// TestSQLiteFileLostWhileCandidatesStart: the SQLite file is lost at the
// instant a starting sidecar opens it, with every sidecar sampled until a
// leader on the old file would have appeared, in as many rounds as fit in
// about amidStartsBudget.
//
// In each round a first sidecar leads on leader.db; three more are
// launched a few milliseconds apart, and the file is lost (deleted with
// its -wal and -shm, or another database renamed over it) 0-6 ms after the
// first or the second of them opens it (seen in /proc/<pid>/fd, read every
// millisecond). The other starters open it scattered around the loss, as a
// launch takes 0.1-0.3 s on a loaded machine; each one's offset from the
// loss is logged. A fourth sidecar is launched on the path right after the
// loss.
//
// Every sidecar serving is asked GET /leader every 5 ms from before the
// loss until a lease duration and two retry periods after it (a starter
// left on the old file would take it over once the first leader's lease
// ran out) and the survivors settle: one leader, named as holder by all.
// Asserted: no sweep has two leader:true answers; no claim of a term on
// the old file is sent after a claim on the file at the path arrived (a
// process's terms are on the old file unless it ends on the file at the
// path); every process that exited did so non-zero, naming the file;
// every process still running holds the file now at the path open, and
// nothing else under the database's names, and names the one leader as
// holder. A starter hit the old file if it was seen holding it or exited
// saying the store was lost. The loss and the offsets of a round are drawn
// from its seed, which it logs; SQLITE_LOSS_RACE_SEED=<seed> replays that
// one round.
func TestSQLiteFileLostWhileCandidatesStart(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var results []amidStartsResult
	play := func(seed uint64) func(*testing.T) {
		return func(t *testing.T) {
			t.Parallel()
			var r amidStartsResult
			defer func() {
				mu.Lock()
				defer mu.Unlock()
				results = append(results, r)
			}()
			amidStartsRound(t, seed, &r)
		}
	}
	wave := func(name string, seeds ...uint64) {
		t.Run(name, func(t *testing.T) {
			for _, seed := range seeds {
				t.Run(fmt.Sprintf("seed-%d", seed), play(seed))
			}
		})
	}
	began := time.Now()
	if s := os.Getenv(amidStartsSeedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", amidStartsSeedEnv, err)
		}
		wave("replay", seed)
	} else {
		seeds := rand.New(rand.NewPCG(uint64(began.UnixNano()), 0))
		var last time.Duration // the last wave took
		for n := 0; time.Since(began)+last <= amidStartsBudget; n++ {
			drawn := make([]uint64, amidStartsWave)
			for i := range drawn {
				drawn[i] = seeds.Uint64()
			}
			waveBegan := time.Now()
			wave(fmt.Sprintf("wave-%d", n), drawn...)
			last = time.Since(waveBegan)
		}
	}
	t.Log(summarizeAmidStarts(results, time.Since(began)))
}

// amidStartsResult is what one round measured.
type amidStartsResult struct {
	loss                string
	starters, hitOld    int // starters launched, and those that hit the old file
	exited, lostExits   int // processes that exited, and those saying the store was lost
	sweeps, twoLeaders  int // sweeps, and those with two leader:true answers
	lateOldClaims       int // claims on the old file sent after a claim on the new one arrived
	longestLateOldClaim time.Duration
}

// summarizeAmidStarts is the figures of all rounds, for the log.
func summarizeAmidStarts(results []amidStartsResult, took time.Duration) string {
	var sum amidStartsResult
	byLoss := map[string]int{}
	hitsByLoss := map[string]int{}
	twoLeaderRounds, lateRounds := 0, 0
	for _, r := range results {
		byLoss[r.loss]++
		hitsByLoss[r.loss] += r.hitOld
		sum.starters += r.starters
		sum.hitOld += r.hitOld
		sum.exited += r.exited
		sum.lostExits += r.lostExits
		sum.sweeps += r.sweeps
		sum.twoLeaders += r.twoLeaders
		sum.lateOldClaims += r.lateOldClaims
		sum.longestLateOldClaim = max(sum.longestLateOldClaim, r.longestLateOldClaim)
		if r.twoLeaders > 0 {
			twoLeaderRounds++
		}
		if r.lateOldClaims > 0 {
			lateRounds++
		}
	}
	return fmt.Sprintf("%d rounds in %v (by loss %v); %d starters, %d hit the old file (by loss %v); "+
		"%d processes exited, %d saying the store was lost; %d sweeps, %d with two leaders (in %d rounds); "+
		"%d claims on the old file after one on the new (in %d rounds, longest %v after)",
		len(results), took.Round(time.Second), byLoss, sum.starters, sum.hitOld, hitsByLoss,
		sum.exited, sum.lostExits, sum.sweeps, sum.twoLeaders, twoLeaderRounds,
		sum.lateOldClaims, lateRounds, sum.longestLateOldClaim)
}

// amidStartsProc is a sidecar of a round, by its name in the sweeps.
type amidStartsProc struct {
	name string
	s    *sidecartest.Sidecar
}

// amidStartsRound runs the round drawn from seed and notes what it
// measured in r as it goes (a round that fails early notes what it had).
func amidStartsRound(t *testing.T, seed uint64, r *amidStartsResult) {
	rng := rand.New(rand.NewPCG(seed, 0))
	loss := startRaceLosses[rng.IntN(len(startRaceLosses))]
	gaps := make([]time.Duration, amidStartsStarters)
	for i := range gaps {
		gaps[i] = time.Duration(rng.Int64N(int64(amidStartsLaunchGap))).Round(10 * time.Microsecond)
	}
	anchor := 1 + rng.IntN(2)
	delay := time.Duration(rng.Int64N(int64(amidStartsLossDelay))).Round(10 * time.Microsecond)
	r.loss, r.starters = loss.name, amidStartsStarters
	t.Logf("%s=%d: %s %v after the %s of %d starters (launched %v apart) opens the file",
		amidStartsSeedEnv, seed, loss.name, delay, map[int]string{1: "first", 2: "second"}[anchor], amidStartsStarters, gaps)

	dir := t.TempDir()
	path, other := filepath.Join(dir, "leader.db"), filepath.Join(dir, "other.db")
	makeReleasedDatabase(t, other, 5)
	first := sidecartest.Start(t, path)
	sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{first}, 10*time.Second)
	old := statDatabaseFiles(path)

	// Every member is swept as epoch 0; the claims are judged by the file
	// each process ended on, once that is known.
	var set sidecartest.Members
	set.Add("first", first, 0)
	var claims sidecartest.ClaimLog
	halt := claims.SweepUntilHalted(amidStartsSweepEvery, set.All)
	defer halt()
	procs := []amidStartsProc{{"first", first}}
	join := func(name string, s *sidecartest.Sidecar) {
		procs = append(procs, amidStartsProc{name, s})
		go func() {
			if <-s.Ready(); s.Addr() != "" {
				set.Add(name, s, 0)
			}
		}()
	}
	var starters []*sidecartest.Sidecar
	for i, gap := range gaps {
		time.Sleep(gap)
		s := sidecartest.Launch(t, path)
		starters = append(starters, s)
		join(fmt.Sprintf("starter-%d", i+1), s)
	}
	watch := watchOpens(starters, path, old)
	defer watch.stop()
	watch.awaitOpened(t, anchor)
	time.Sleep(delay)
	lostAt := time.Now()
	watch.loses()
	if err := loss.lose(t, path, other); err != nil {
		t.Fatal(err)
	}
	join("fourth", sidecartest.Launch(t, path))
	time.Sleep(100 * time.Millisecond)
	opened, heldOld := watch.stop()

	time.Sleep(time.Until(lostAt.Add(sidecartest.LeaseDuration + 2*sidecartest.RetryPeriod)))
	leader, settled := awaitOneLeader(procs, 2*sidecartest.LeaseDuration)
	halt()

	onPath, survivors := checkEnds(t, procs, path, leader, settled, r)
	var offsets []string
	for i, s := range starters {
		if heldOld[i] || !s.Alive() && strings.Contains(s.Logs(), "store lost") {
			r.hitOld++
		}
		offsets = append(offsets, offset(opened[i], lostAt))
	}

	// The claims judged by file: the terms on the file at the path are
	// newer than every term on the old one.
	var judged sidecartest.ClaimLog
	for _, c := range claims.Claims() {
		c.Term.Epoch = onPath[c.Who]
		judged.Add(c)
	}
	r.sweeps, r.twoLeaders = claims.Sweeps(), judged.TwoLeaderSweeps()
	r.lateOldClaims, r.longestLateOldClaim = judged.Overlaps()
	terms := map[sidecartest.Term]int{}
	for _, c := range judged.Claims() {
		terms[c.Term]++
	}
	t.Logf("starters opened the file at %v from the loss; %d hit the old file (seen holding it %v); %d exited (%d store lost); "+
		"%d sweeps, %d with two leaders, %d late old-file claims; claims per term (file/token) %v",
		offsets, r.hitOld, heldOld, r.exited, r.lostExits, r.sweeps, r.twoLeaders, r.lateOldClaims, terms)
	if r.twoLeaders > 0 {
		t.Errorf("%d sweeps had two leader:true answers", r.twoLeaders)
	}
	if r.lateOldClaims > 0 {
		t.Errorf("%d claims on the old file were sent after a claim on the file at the path arrived (longest %v after)",
			r.lateOldClaims, r.longestLateOldClaim)
	}
	if !settled {
		t.Errorf("no single leader named by every running sidecar %v after the loss", time.Since(lostAt).Round(time.Millisecond))
	}
	if errs := claims.Failed(survivors...); len(errs) > 0 {
		t.Errorf("running sidecars on the file at the path did not answer: %v", errs)
	}
}

// checkEnds checks how each process of a round ended: one still running
// must be on the file now at path, holding nothing else under the
// database's names, and name leader as holder (if settled); one that
// exited must have done so non-zero, naming the file. It returns 1 for
// each process on the file at the path (the epoch of its terms; the old
// file's are 0) and the names of those processes.
func checkEnds(t *testing.T, procs []amidStartsProc, path, leader string, settled bool,
	r *amidStartsResult) (onPath map[string]int, survivors []string) {
	t.Helper()
	current := statDatabaseFiles(path)
	onPath = map[string]int{}
	for _, p := range procs {
		if p.s.Alive() {
			held := heldFiles(p.s.Pid(), path)
			if !holdsOnly(held, current, path) {
				t.Errorf("%s (pid %d) still runs, but not on the file at %s: it holds %v", p.name, p.s.Pid(), path, held)
				continue
			}
			onPath[p.name] = 1
			survivors = append(survivors, p.name)
			if st, err := p.s.Leader(); settled && (err != nil || st.Holder != leader) {
				t.Errorf("%s (pid %d) names holder %q (%v) while %q leads", p.name, p.s.Pid(), st.Holder, err, leader)
			}
			continue
		}
		r.exited++
		code, logs := p.s.WaitExit(time.Second), p.s.Logs()
		if strings.Contains(logs, "store lost") {
			r.lostExits++
		} else {
			t.Logf("%s (pid %d) exited with status %d: %s", p.name, p.s.Pid(), code, lastLine(logs))
		}
		if code == 0 || !strings.Contains(logs, path) {
			t.Errorf("%s (pid %d) exited with status %d; want non-zero and a log naming %s:\n%s", p.name, p.s.Pid(), code, path, logs)
		}
	}
	return onPath, survivors
}

// offset is at from the loss (lostAt), or "later" if zero.
func offset(at, lostAt time.Time) string {
	if at.IsZero() {
		return "later"
	}
	return fmt.Sprintf("%+.1fms", float64(at.Sub(lostAt))/float64(time.Millisecond))
}

// awaitOneLeader waits until, among the sidecars of procs still running,
// one leads and every one names it as holder, and returns its identity.
func awaitOneLeader(procs []amidStartsProc, within time.Duration) (string, bool) {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var leaders, holders []string
		for _, p := range procs {
			if !p.s.Alive() {
				continue
			}
			st, err := p.s.Leader()
			if err != nil {
				leaders = nil
				break
			}
			if st.Leader {
				leaders = append(leaders, st.Identity)
			}
			holders = append(holders, st.Holder)
		}
		if len(leaders) == 1 && !slices.ContainsFunc(holders, func(h string) bool { return h != leaders[0] }) {
			return leaders[0], true
		}
	}
	return "", false
}
