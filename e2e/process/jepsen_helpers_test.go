package process

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// The set test in the manner of Jepsen's lock-set: three sidecars elect on
// one SQLite file; each has an app worker in the test process that, while
// it believes its sidecar leads, appends an id of its own to one list kept
// in a PostgreSQL row (a read-modify-write in one transaction); a nemesis
// pauses and kills the sidecars; the history of appends is then checked.

// jepsenDuration is how long the nemesis runs: the short default in make
// test, LEADER_SIDECAR_JEPSEN_DURATION (make jepsen) for a long run.
func jepsenDuration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("LEADER_SIDECAR_JEPSEN_DURATION")
	if v == "" {
		return 12 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("LEADER_SIDECAR_JEPSEN_DURATION=%q: want a positive duration such as 5m", v)
	}
	return d
}

// jepsenSeed is LEADER_SIDECAR_JEPSEN_SEED, or the clock's.
func jepsenSeed(t *testing.T) uint64 {
	t.Helper()
	if v := os.Getenv("LEADER_SIDECAR_JEPSEN_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LEADER_SIDECAR_JEPSEN_SEED=%q: want an unsigned integer", v)
		}
		return s
	}
	return uint64(time.Now().UnixNano())
}

// Outcomes of an append.
const (
	appendOK      = "ok"      // committed
	appendRefused = "refused" // the guard refused the term; rolled back
	appendFailed  = "failed"  // an error before the commit; rolled back
	appendUnknown = "unknown" // the commit itself failed: it may have taken effect
	finalRead     = "read"    // the read of the final list, after the run
)

// setState is the list as porcupine sees it: its length and a hash of its
// elements in order, comparable with ==.
type setState struct {
	n int
	h uint64
}

// with is the state after appending id.
func (s setState) with(id int64) setState {
	h := (s.h ^ uint64(id)) * 0x100000001b3
	h ^= h >> 29
	return setState{s.n + 1, h}
}

// stateOf is the state of a list.
func stateOf(list []int64) setState {
	var s setState
	for _, id := range list {
		s = s.with(id)
	}
	return s
}

// setOp is one operation of the history: an append of id, or the final
// read.
type setOp struct {
	replica int
	id      int64
	term    fence.TermID
	outcome string
	read    setState // the list the append read, or the final list
	readOK  bool     // the append got as far as reading
	call    time.Duration
	ret     time.Duration
}

// setModel is the list under appends: an append that committed read the
// list as it was and wrote it with its id at the end; one refused or
// failed had no effect; one of unknown outcome had either; the final read
// returns the list.
var setModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{setState{}} },
	Step: func(state, input, output any) []any {
		s, op := state.(setState), output.(setOp)
		switch op.outcome {
		case appendOK:
			if op.read == s {
				return []any{s.with(op.id)}
			}
			return nil
		case appendUnknown:
			if op.read == s {
				return []any{s, s.with(op.id)}
			}
			return []any{s}
		case finalRead:
			if op.read == s {
				return []any{s}
			}
			return nil
		default:
			return []any{s}
		}
	},
	Hash: func(state any) uint64 { return state.(setState).h },
	DescribeOperation: func(_, output any) string {
		op := output.(setOp)
		return fmt.Sprintf("append %d in %v: %s after reading %d", op.id, op.term, op.outcome, op.read.n)
	},
}

// setRun is one run: the sidecars, the workers' history and the nemesis.
type setRun struct {
	t       *testing.T
	guarded bool
	db      *sql.DB
	guard   *fence.SQLGuard
	table   string
	file    string // the election's SQLite file
	began   time.Time
	nextID  atomic.Int64

	mu      sync.Mutex
	slots   []*sidecartest.Sidecar // a replica's current sidecar
	stopped map[*sidecartest.Sidecar]bool
	history []setOp
	faults  map[string]int
}

// newSetRun makes the list's table (one row, the list as text) and the
// guard's table, both named for the test, and starts n sidecars.
func newSetRun(t *testing.T, table string, guarded bool, n int) *setRun {
	t.Helper()
	db, err := sql.Open("pgx", postgresServer.Server(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	guard, err := fence.NewSQLGuard(table + "_fence")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP TABLE IF EXISTS ` + table, `DROP TABLE IF EXISTS ` + guard.Table(),
		`CREATE TABLE ` + table + ` (k INT PRIMARY KEY, elems TEXT NOT NULL)`,
		`INSERT INTO ` + table + ` VALUES (1, '')`,
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := guard.EnsureTable(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	r := &setRun{t: t, guarded: guarded, db: db, guard: guard, table: table, file: sidecartest.DBPath(t),
		stopped: map[*sidecartest.Sidecar]bool{}, faults: map[string]int{}}
	r.slots = sidecartest.StartMany(t, r.file, n)
	r.began = time.Now()
	return r
}

// quickClient asks the sidecars for the workers and the nemesis: a paused
// sidecar does not answer, and they do not wait for it long.
var quickClient = &http.Client{Timeout: 300 * time.Millisecond}

// ask is GET /leader of s with quickClient.
func ask(s *sidecartest.Sidecar) (sidecartest.State, error) {
	resp, err := quickClient.Get("http://" + s.Addr() + "/leader")
	if err != nil {
		return sidecartest.State{}, err
	}
	defer resp.Body.Close()
	var st sidecartest.State
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// slot is replica i's current sidecar.
func (r *setRun) slot(i int) *sidecartest.Sidecar {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.slots[i]
}

// worker is replica i's app until ctx ends. Every askEvery it asks its
// sidecar GET /leader; an answer replaces what it knows, but no answer (a
// paused or killed sidecar) leaves the last one in hand, as a slow app
// that trusts what it last heard would. While what it knows says leader,
// it appends, one id after the other, with that term.
func (r *setRun) worker(ctx context.Context, i int, rng *rand.Rand) {
	const askEvery = 500 * time.Millisecond
	var known *fence.TermID
	var asked time.Time
	for ctx.Err() == nil {
		if time.Since(asked) >= askEvery {
			asked = time.Now()
			if st, err := ask(r.slot(i)); err == nil {
				known = nil
				if st.Leader && st.Token != nil {
					known = &fence.TermID{Token: *st.Token, Holder: st.Identity}
				}
			}
		}
		if known == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		r.appendOnce(i, *known, rng)
	}
}

// appendOnce appends a fresh id to the list in term: in one transaction,
// the guard's check (unless the run is unguarded), the read of the list, a
// moment's work, the write of the list with the id at the end, the commit.
func (r *setRun) appendOnce(replica int, term fence.TermID, rng *rand.Rand) {
	op := setOp{replica: replica, id: r.nextID.Add(1), term: term, call: time.Since(r.began)}
	op.outcome = func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tx, err := r.db.BeginTx(ctx, nil)
		if err != nil {
			return appendFailed
		}
		defer tx.Rollback()
		if r.guarded {
			if err := r.guard.Check(ctx, tx, "set", term); err != nil {
				if errors.Is(err, fence.ErrStaleToken) || errors.Is(err, fence.ErrTokenReused) {
					return appendRefused
				}
				return appendFailed
			}
		}
		var elems string
		if err := tx.QueryRowContext(ctx, `SELECT elems FROM `+r.table+` WHERE k = 1`).Scan(&elems); err != nil {
			return appendFailed
		}
		list, err := parseList(elems)
		if err != nil {
			r.t.Errorf("the list's row: %v", err)
			return appendFailed
		}
		op.read, op.readOK = stateOf(list), true
		time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
		if _, err := tx.ExecContext(ctx, `UPDATE `+r.table+` SET elems = $1 WHERE k = 1`, formatList(append(list, op.id))); err != nil {
			return appendFailed
		}
		if err := tx.Commit(); err != nil {
			return appendUnknown
		}
		return appendOK
	}()
	op.ret = time.Since(r.began)
	r.mu.Lock()
	r.history = append(r.history, op)
	r.mu.Unlock()
}

// parseList reads the list's text: ids separated by commas.
func parseList(s string) ([]int64, error) {
	if s == "" {
		return nil, nil
	}
	var list []int64
	for f := range strings.SplitSeq(s, ",") {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("element %q: %w", f, err)
		}
		list = append(list, id)
	}
	return list, nil
}

// formatList is the list's text.
func formatList(list []int64) string {
	fs := make([]string, len(list))
	for i, id := range list {
		fs[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(fs, ",")
}

// leaderSlot is the replica whose sidecar answers leader:true, or -1.
func (r *setRun) leaderSlot() int {
	for i := range r.slots {
		s := r.slot(i)
		if st, err := ask(s); err == nil && st.Leader {
			return i
		}
	}
	return -1
}

// nemesis injects faults until ctx ends, each after a pause of 0.5-2 s:
// the leader's sidecar is stopped (SIGSTOP) for longer than the lease,
// then continued; or a sidecar, the leader one time in two, is killed
// (SIGKILL) and a new one started in its place. The first fault is a
// pause, the fault that makes a stale leader. Every sidecar runs again
// when it returns.
func (r *setRun) nemesis(ctx context.Context, rng *rand.Rand) {
	wait := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	paused := false
	for wait(500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))) {
		leader := r.leaderSlot()
		if leader < 0 {
			continue
		}
		if !paused || rng.IntN(5) < 3 {
			paused = true
			s := r.slot(leader)
			s.Signal(syscall.SIGSTOP)
			r.count("pause")
			time.Sleep(sidecartest.LeaseDuration + 1500*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Second))))
			s.Signal(syscall.SIGCONT)
			continue
		}
		victim := leader
		if rng.IntN(2) == 0 {
			victim = rng.IntN(len(r.slots))
		}
		s := r.slot(victim)
		s.Signal(syscall.SIGKILL)
		s.WaitExit(10 * time.Second)
		r.count("kill")
		next := sidecartest.Launch(r.t, r.file)
		next.WaitServing()
		r.mu.Lock()
		r.slots[victim] = next
		r.mu.Unlock()
	}
}

// count counts a fault of kind.
func (r *setRun) count(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[kind]++
}

// run starts a worker per replica and the nemesis, lets the nemesis run
// for d, then stops the workers and reads the final list.
func (r *setRun) run(seed uint64, d time.Duration) []int64 {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), d)
	defer cancel()
	var wg sync.WaitGroup
	for i := range r.slots {
		rng := rand.New(rand.NewPCG(seed, uint64(i+1)))
		wg.Go(func() { r.worker(ctx, i, rng) })
	}
	nemesisDone := make(chan struct{})
	go func() {
		defer close(nemesisDone)
		r.nemesis(ctx, rand.New(rand.NewPCG(seed, 0)))
	}()
	<-nemesisDone
	cancel()
	wg.Wait()

	var elems string
	call := time.Since(r.began)
	if err := r.db.QueryRowContext(r.t.Context(), `SELECT elems FROM `+r.table+` WHERE k = 1`).Scan(&elems); err != nil {
		r.t.Fatalf("reading the final list: %v", err)
	}
	list, err := parseList(elems)
	if err != nil {
		r.t.Fatalf("the final list: %v", err)
	}
	r.history = append(r.history, setOp{replica: len(r.slots), outcome: finalRead, read: stateOf(list), readOK: true,
		call: call, ret: time.Since(r.began)})
	return list
}

// setVerdict is what the checker found.
type setVerdict struct {
	ops, faults                        int
	acknowledged, refused, failed, unk int
	lost, duplicated, phantom          int // phantom: an id in the list whose append was not acknowledged and may not have taken effect
	linearizable                       porcupine.CheckResult
}

func (v setVerdict) String() string {
	return fmt.Sprintf("operations %d, faults %d, acknowledged %d, refused %d, failed %d, unknown %d, lost %d, duplicated %d, phantom %d, porcupine: %s",
		v.ops, v.faults, v.acknowledged, v.refused, v.failed, v.unk, v.lost, v.duplicated, v.phantom, v.linearizable)
}

// check checks the history against the final list: every acknowledged
// append is in it, no id twice, none that was refused or failed, and the
// history is linearizable as setModel (porcupine, within limit).
func (r *setRun) check(final []int64, limit time.Duration) setVerdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	var v setVerdict
	for _, n := range r.faults {
		v.faults += n
	}
	seen := map[int64]int{}
	for _, id := range final {
		seen[id]++
	}
	var ops []porcupine.Operation
	for _, op := range r.history {
		ret := op.ret.Nanoseconds()
		switch op.outcome {
		case appendOK:
			v.acknowledged++
			if seen[op.id] == 0 {
				v.lost++
			}
		case appendRefused, appendFailed:
			if op.outcome == appendRefused {
				v.refused++
			} else {
				v.failed++
			}
			if seen[op.id] > 0 {
				v.phantom++
			}
		case appendUnknown:
			v.unk++
			ret = math.MaxInt64 // it may take effect at any time after its call
		}
		if op.outcome != finalRead {
			v.ops++
		}
		ops = append(ops, porcupine.Operation{ClientId: op.replica, Input: op.id, Call: op.call.Nanoseconds(), Output: op, Return: ret})
	}
	for _, n := range seen {
		if n > 1 {
			v.duplicated += n - 1
		}
	}
	invoked := map[int64]bool{}
	for _, op := range r.history {
		invoked[op.id] = op.outcome != finalRead
	}
	for id := range seen {
		if !invoked[id] {
			v.phantom++
		}
	}
	v.linearizable = porcupine.CheckOperationsTimeout(setModel.ToModel(), ops, limit)
	return v
}
