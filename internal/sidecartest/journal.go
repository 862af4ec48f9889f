package sidecartest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Journal is a file the commands of sidecar lock runs append lines to, so
// a test learns which commands ran, with which token and pid, and when.
// The test that made it kills the process group of every command that
// wrote to it when it ends.
type Journal string

// NewJournal is an empty journal in a directory of t's own.
func NewJournal(t testing.TB) Journal {
	t.Helper()
	j := Journal(filepath.Join(t.TempDir(), "journal"))
	t.Cleanup(func() { j.killAll(t) })
	return j
}

// Line is the shell command that appends "<word> <token> <pid> <unix ns>"
// to the journal, the token being the command's LEADER_SIDECAR_TOKEN and
// the pid the shell's own.
func (j Journal) Line(word string) string {
	return fmt.Sprintf(`echo "%s $LEADER_SIDECAR_TOKEN $$ $(date +%%s%%N)" >> '%s'`, word, j)
}

// Entry is one line of the journal.
type Entry struct {
	Word  string
	Token int64
	Pid   int
	At    time.Time
}

// Entries are the journal's whole lines so far, in order.
func (j Journal) Entries(t testing.TB) []Entry {
	t.Helper()
	data, err := os.ReadFile(string(j))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	// Only whole lines: the shell's >> creates the file before it writes,
	// and a line may be read before its newline is written.
	whole := string(data[:strings.LastIndexByte(string(data), '\n')+1])
	var out []Entry
	for _, l := range strings.Split(strings.TrimSuffix(whole, "\n"), "\n") {
		if l == "" {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 4 {
			t.Fatalf("journal line %q", l)
		}
		token, err1 := strconv.ParseInt(f[1], 10, 64)
		pid, err2 := strconv.Atoi(f[2])
		ns, err3 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("journal line %q", l)
		}
		out = append(out, Entry{f[0], token, pid, time.Unix(0, ns)})
	}
	return out
}

// Await polls the journal until it has a line with word, and returns the
// first such line.
func (j Journal) Await(t testing.TB, word string, within time.Duration) Entry {
	t.Helper()
	e, ok := j.awaitLine(t, within, func(e Entry) bool { return e.Word == word })
	if !ok {
		t.Fatalf("no %q in the journal within %v: %v", word, within, j.Entries(t))
	}
	return e
}

// AwaitOtherTerm polls the journal until it has a line with word and a
// token other than before's, and returns the first such line: what a
// command of another term journalled.
func (j Journal) AwaitOtherTerm(t testing.TB, word string, before Entry, within time.Duration) Entry {
	t.Helper()
	e, ok := j.awaitLine(t, within, func(e Entry) bool { return e.Word == word && e.Token != before.Token })
	if !ok {
		t.Fatalf("no %q with a token other than %d in the journal within %v: %v", word, before.Token, within, j.Entries(t))
	}
	return e
}

// awaitLine polls the journal every 10ms until it has a line that match
// accepts, and returns the first such line, or false after within.
func (j Journal) awaitLine(t testing.TB, within time.Duration, match func(Entry) bool) (Entry, bool) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, e := range j.Entries(t) {
			if match(e) {
				return e, true
			}
		}
	}
	return Entry{}, false
}

// SignalAndAwaitNext sends sig to the lock first, whose command journals
// "caught" and exits 4 when sig reaches it, and fails t unless first exits
// with its command's 4, the command journalled "caught", the command of the
// lock second then journals "next", and second exits 0. It returns the
// "caught" and "next" lines.
func (j Journal) SignalAndAwaitNext(t testing.TB, first, second *Sidecar, sig syscall.Signal) (caught, next Entry) {
	t.Helper()
	first.Signal(sig)
	if code := first.WaitExit(10 * time.Second); code != 4 {
		t.Fatalf("exit status %d, want CMD's 4:\n%s", code, first.Logs())
	}
	caught = j.Await(t, "caught", time.Second)
	next = j.Await(t, "next", 10*time.Second)
	if code := second.WaitExit(10 * time.Second); code != 0 {
		t.Fatalf("second lock: exit status %d", code)
	}
	return caught, next
}

// killAll kills the process group of every command that wrote to the
// journal, so a failed test leaves nothing running.
func (j Journal) killAll(t testing.TB) {
	for _, e := range j.Entries(t) {
		_ = syscall.Kill(-e.Pid, syscall.SIGKILL)
	}
}

// RunSampler samples, every few milliseconds, which of the processes that
// wrote a "start" line to a journal still run, until it is halted.
type RunSampler struct {
	j Journal
	// byTerm counts as running every process that wrote any line, and
	// an overlap as processes of two tokens running at once.
	byTerm  bool
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	samples int
	overlap int       // samples in which two or more ran
	first   time.Time // of the first overlapping sample
	pids    []int     // that ran together in the first overlapping sample
}

// SampleRuns starts sampling the journal's started processes every
// interval; Halt stops it.
func (j Journal) SampleRuns(t testing.TB, every time.Duration) *RunSampler {
	t.Helper()
	return j.sampleRuns(t, every, false)
}

func (j Journal) sampleRuns(t testing.TB, every time.Duration, byTerm bool) *RunSampler {
	r := &RunSampler{j: j, byTerm: byTerm, stop: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
			r.sample(t)
		}
	}()
	t.Cleanup(r.Halt)
	return r
}

// SampleTerms is SampleRuns for commands that start processes of their
// own: every process that wrote a line (any word) belongs to its line's
// token, and a sample in which processes of two tokens run is an overlap.
func (j Journal) SampleTerms(t testing.TB, every time.Duration) *RunSampler {
	t.Helper()
	return j.sampleRuns(t, every, true)
}

func (r *RunSampler) sample(t testing.TB) {
	var running []int
	seen := map[int]bool{}
	terms := map[int64]bool{}
	for _, e := range r.j.Entries(t) {
		if (e.Word != "start" && !r.byTerm) || seen[e.Pid] {
			continue
		}
		seen[e.Pid] = true
		if !ProcessGone(e.Pid) {
			running = append(running, e.Pid)
			terms[e.Token] = true
		}
	}
	together := len(running)
	if r.byTerm {
		together = len(terms)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples++
	if together > 1 {
		if r.overlap == 0 {
			r.first, r.pids = time.Now(), running
		}
		r.overlap++
	}
}

// Halt stops the sampling; it may be called more than once.
func (r *RunSampler) Halt() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.wg.Wait()
}

// Check halts the sampling and fails t if two started processes ever ran
// at once, or if there were fewer than min samples. It returns how many
// samples were taken.
func (r *RunSampler) Check(t testing.TB, min int) int {
	t.Helper()
	r.Halt()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.overlap > 0 {
		t.Fatalf("%d of %d samples found two commands running at once (first at %s: pids %v): %v",
			r.overlap, r.samples, r.first.Format("15:04:05.000"), r.pids, r.j.Entries(t))
	}
	if r.samples < min {
		t.Fatalf("only %d samples, want at least %d", r.samples, min)
	}
	return r.samples
}

// ProcessGone reports whether process pid has ended (a zombie has ended:
// it runs no more, it only waits to be reaped).
func ProcessGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: the state follows the last ')'.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// GroupMembers are the processes of process group pgid that have not
// ended (zombies left out), as /proc lists them.
func GroupMembers(pgid int) []int {
	return liveProcesses(func(_, pgrp int) bool { return pgrp == pgid })
}

// ChildrenOf are the processes whose parent is ppid that have not ended.
func ChildrenOf(ppid int) []int {
	return liveProcesses(func(parent, _ int) bool { return parent == ppid })
}

// ZombiesOf are the children of ppid that have ended and wait for ppid
// to reap them.
func ZombiesOf(ppid int) []int {
	return processes(func(state string, parent, _ int) bool { return state == "Z" && parent == ppid })
}

// liveProcesses are the processes in /proc, zombies left out, for which
// match(parent pid, process group id) holds.
func liveProcesses(match func(ppid, pgrp int) bool) []int {
	return processes(func(state string, ppid, pgrp int) bool { return state != "Z" && match(ppid, pgrp) })
}

// processes are the processes in /proc for which match(state, parent pid,
// process group id) holds.
func processes(match func(state string, ppid, pgrp int) bool) []int {
	dirs, _ := os.ReadDir("/proc")
	var out []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: the state follows the last ')'.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 3 {
			continue
		}
		ppid, err1 := strconv.Atoi(f[1])
		pgrp, err2 := strconv.Atoi(f[2])
		if err1 == nil && err2 == nil && match(f[0], ppid, pgrp) {
			out = append(out, pid)
		}
	}
	return out
}

// AwaitGroupGone waits until process group pgid has no process left that
// runs, failing t after within; it returns how long that took.
func AwaitGroupGone(t testing.TB, pgid int, within time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	for deadline := began.Add(within); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if len(GroupMembers(pgid)) == 0 {
			return time.Since(began)
		}
	}
	t.Fatalf("process group %d still has %v running %v later", pgid, GroupMembers(pgid), within)
	return 0
}

// AwaitGone waits until process pid has ended, failing t after within.
func AwaitGone(t testing.TB, pid int, within time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	for deadline := began.Add(within); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ProcessGone(pid) {
			return time.Since(began)
		}
	}
	t.Fatalf("process %d still runs %v later", pid, within)
	return 0
}
