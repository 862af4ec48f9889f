package settest

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// Config is what a run needs from its test.
type Config struct {
	// DB is the database of the list (a row of table Table, made by New)
	// and of the guard's table (Table + "_fence"); PostgreSQL.
	DB    *sql.DB
	Table string
	// Replicas is how many sidecars, each with its app (3 if 0).
	Replicas int
	// Launch starts one sidecar on the test's store without waiting for
	// it to serve; the nemesis calls it again for each sidecar it kills.
	Launch func() *sidecartest.Sidecar
	// StoreFaults are the faults of the test's store the nemesis injects
	// besides pauses and kills (none: those alone).
	StoreFaults []StoreFault
}

// StoreFault is a fault of the store that the nemesis injects on the
// leader's sidecar, for the lease and 2-4 s more, then undoes.
type StoreFault struct {
	// Name counts the fault in the run's faults.
	Name string
	// Inject starts the fault on s (its path to the store cut, or slowed;
	// its record deleted) and returns what ends it.
	Inject func(s *sidecartest.Sidecar) (undo func())
}

// ProxiedStore keeps each sidecar's sidecartest.TCPProxy to the store and
// gives the faults a proxy makes: "cut" (every connection closed, new ones
// held unanswered, as a partition) and "slow" (every chunk of bytes
// delayed by slow, both ways, as a store under load).
type ProxiedStore struct {
	mu      sync.Mutex
	proxies map[*sidecartest.Sidecar]*sidecartest.TCPProxy
}

// Add records s's proxy.
func (p *ProxiedStore) Add(s *sidecartest.Sidecar, px *sidecartest.TCPProxy) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proxies == nil {
		p.proxies = map[*sidecartest.Sidecar]*sidecartest.TCPProxy{}
	}
	p.proxies[s] = px
}

// Faults are the cut and, with slow above 0, the slow store.
func (p *ProxiedStore) Faults(slow time.Duration) []StoreFault {
	proxy := func(s *sidecartest.Sidecar) *sidecartest.TCPProxy {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.proxies[s]
	}
	faults := []StoreFault{{Name: "cut", Inject: func(s *sidecartest.Sidecar) func() {
		px := proxy(s)
		px.Cut()
		return px.Heal
	}}}
	if slow > 0 {
		faults = append(faults, StoreFault{Name: "slow", Inject: func(s *sidecartest.Sidecar) func() {
			px := proxy(s)
			px.Slow(slow)
			return func() { px.Slow(0) }
		}})
	}
	return faults
}

// Duration is how long the nemesis runs: 12 s, or
// LEADER_SIDECAR_JEPSEN_DURATION (make jepsen) for a long run.
func Duration(t testing.TB) time.Duration {
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

// Seed is LEADER_SIDECAR_JEPSEN_SEED, or the clock's.
func Seed(t testing.TB) uint64 {
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

// Fenced runs the set test with the guard and fails t unless the checker
// finds nothing wrong, the guard refused some appends (the nemesis made a
// stale leader), and there was a fault and ten acknowledged appends. It
// returns the verdict.
func Fenced(t *testing.T, c Config) Verdict {
	t.Helper()
	v := run(t, c, true)
	if v.Faults < 1 || v.Acknowledged < 10 {
		t.Errorf("%d faults and %d acknowledged appends: too few to test anything", v.Faults, v.Acknowledged)
	}
	if v.Refused == 0 {
		t.Errorf("the guard refused no append: the nemesis made no stale leader")
	}
	if v.Violated() {
		t.Errorf("with the guard: %d lost, %d duplicated, %d phantom, porcupine %s; want 0, 0, 0, Ok", v.Lost, v.Duplicated, v.Phantom, v.Linearizable)
	}
	return v
}

// Unfenced runs the set test with the apps writing without the guard, the
// unsafe baseline, and fails t unless the checker finds a violation.
func Unfenced(t *testing.T, c Config) Verdict {
	t.Helper()
	v := run(t, c, false)
	if !v.Violated() {
		t.Errorf("without the guard the checker found no violation (%v): the nemesis made no stale leader write", v)
	}
	return v
}

// run is one run, logged with its seed and verdict.
func run(t *testing.T, c Config, guarded bool) Verdict {
	t.Helper()
	seed, d := Seed(t), Duration(t)
	t.Logf("seed %d (LEADER_SIDECAR_JEPSEN_SEED), nemesis for %v", seed, d)
	r := New(t, c, guarded)
	final := r.Run(seed, d)
	checked := time.Now()
	v := r.Check(final, 5*time.Minute)
	which := "guard on"
	if !guarded {
		which = "guard off"
	}
	t.Logf("%s, %s: %v (checked in %v); faults %v", t.Name(), which, v, time.Since(checked).Round(time.Millisecond), r.faults)
	return v
}

// Run is one run of the set test: the sidecars, the apps' history, the
// nemesis's faults.
type Run struct {
	t       testing.TB
	c       Config
	guarded bool
	guard   *fence.SQLGuard
	began   time.Time
	nextID  atomic.Int64

	mu      sync.Mutex
	slots   []*sidecartest.Sidecar // each replica's current sidecar
	leads   []bool                 // whether each replica's app believes it leads
	history []op
	faults  map[string]int
}

// New makes the list's table (one row, the list as text, empty) and the
// guard's, dropping what a run before left, and starts the sidecars.
func New(t testing.TB, c Config, guarded bool) *Run {
	t.Helper()
	if c.Replicas == 0 {
		c.Replicas = 3
	}
	guard, err := fence.NewSQLGuard(c.Table + "_fence")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP TABLE IF EXISTS ` + c.Table, `DROP TABLE IF EXISTS ` + guard.Table(),
		`CREATE TABLE ` + c.Table + ` (k INT PRIMARY KEY, elems TEXT NOT NULL)`,
		`INSERT INTO ` + c.Table + ` VALUES (1, '')`,
	} {
		if _, err := c.DB.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := guard.EnsureTable(context.Background(), c.DB); err != nil {
		t.Fatal(err)
	}
	r := &Run{t: t, c: c, guarded: guarded, guard: guard, faults: map[string]int{}}
	for range c.Replicas {
		r.slots = append(r.slots, c.Launch())
	}
	for _, s := range r.slots {
		s.WaitServing()
	}
	r.leads = make([]bool, len(r.slots))
	r.began = time.Now()
	return r
}

// Run starts an app per replica and the nemesis, lets the nemesis run for
// d, then stops the apps and returns the final list, also recorded as the
// last operation of the history.
func (r *Run) Run(seed uint64, d time.Duration) []int64 {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for i := range r.slots {
		rng := rand.New(rand.NewPCG(seed, uint64(i+1)))
		wg.Go(func() { r.worker(ctx, i, rng) })
	}
	r.nemesis(ctx, rand.New(rand.NewPCG(seed, 0)))
	cancel()
	wg.Wait()

	var elems string
	call := time.Since(r.began)
	if err := r.c.DB.QueryRowContext(context.Background(), `SELECT elems FROM `+r.c.Table+` WHERE k = 1`).Scan(&elems); err != nil {
		r.t.Fatalf("reading the final list: %v", err)
	}
	list, err := parseList(elems)
	if err != nil {
		r.t.Fatalf("the final list: %v", err)
	}
	r.mu.Lock()
	r.history = append(r.history, op{replica: len(r.slots), outcome: finalRead, read: stateOf(list), call: call, ret: time.Since(r.began)})
	r.mu.Unlock()
	return list
}

// slot is replica i's current sidecar.
func (r *Run) slot(i int) *sidecartest.Sidecar {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.slots[i]
}
