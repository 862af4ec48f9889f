package process

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/pgtest"
	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// The failover tests run sidecars on a primary and a streaming standby
// made with pg_basebackup (package pgtest), their URL naming both hosts
// with target_session_attrs=read-write, so that they follow a promotion.
// A watch samples every sidecar as fast as it answers and, for each
// leader:true answer, writes as the application would: through
// fence.SQLGuard, in a guard database on another server that does not
// fail over, and, where a test adds it, in the pair's own database with a
// row of data in the same transaction.

// startFailoverPair starts a primary and its standby for one test.
func startFailoverPair(t *testing.T, mode pgtest.Replication) *pgtest.Pair {
	t.Helper()
	p, err := pgtest.StartPair(mode)
	if err != nil {
		t.Fatalf("PostgreSQL for the test: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping PostgreSQL: %v", err)
		}
	})
	return p
}

// spawnOnPair starts a sidecar on the pair and waits until it serves.
func spawnOnPair(t *testing.T, p *pgtest.Pair) *sidecartest.Sidecar {
	t.Helper()
	s := sidecartest.Spawn(t, []string{"LEADER_SIDECAR_POSTGRES_URL=" + p.DSN()}, "--backend", "postgres")
	s.WaitServing()
	return s
}

// guardedWrite is one write of the application through a guard.
type guardedWrite struct {
	where string // the guard's database: outside or failedOver
	term  fence.TermID
	err   error // nil: accepted
}

// The guards' databases.
const (
	outside    = "outside"     // on the package's server, which does not fail over
	failedOver = "failed over" // on the pair, with the records
)

// guardDB is a guard in one database; data, if set, is a table that each
// write adds a row of (token, holder, the server's time) to, after the
// check.
type guardDB struct {
	where string
	db    *sql.DB
	guard *fence.SQLGuard
	data  string
}

// failoverWatch samples sidecars and writes through the guards for them.
type failoverWatch struct {
	t      *testing.T
	guards []guardDB
	log    sidecartest.ClaimLog
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	holder map[int64][]string // token → the identities that claimed it, in order
	writes []guardedWrite
}

// newFailoverWatch makes the guard's table, named for the test, in the
// package's PostgreSQL server.
func newFailoverWatch(t *testing.T, table string) *failoverWatch {
	t.Helper()
	db, err := sql.Open("pgx", postgresServer.Server(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	guard, err := fence.NewSQLGuard(table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `DROP TABLE IF EXISTS `+table); err != nil {
		t.Fatal(err)
	}
	if err := guard.EnsureTable(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	w := &failoverWatch{t: t, guards: []guardDB{{where: outside, db: db, guard: guard}},
		stop: make(chan struct{}), holder: map[int64][]string{}}
	t.Cleanup(w.halt)
	return w
}

// guardOnPair adds a guard in the pair's database, reached as the
// sidecars reach it, whose writes each add a row to the table data.
// Call it before add.
func (w *failoverWatch) guardOnPair(p *pgtest.Pair, table, data string) {
	t := w.t
	t.Helper()
	db, err := sql.Open("pgx", p.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	guard, err := fence.NewSQLGuard(table)
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.EnsureTable(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE `+data+` (token BIGINT NOT NULL, holder TEXT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	w.guards = append(w.guards, guardDB{where: failedOver, db: db, guard: guard, data: data})
}

// add samples s until halt: every leader:true answer is logged, and
// followed by a write through the guard with the term it names.
func (w *failoverWatch) add(s *sidecartest.Sidecar) {
	w.wg.Go(func() {
		for {
			select {
			case <-w.stop:
				return
			case <-s.Done():
				return
			default:
			}
			sent := time.Now()
			st, err := s.Leader()
			if err != nil || !st.Leader {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			term := fence.TermID{Token: *st.Token, Holder: st.Identity}
			w.log.Add(sidecartest.Claim{Who: st.Identity, Term: sidecartest.Term{Token: term.Token}, Sweep: -1, Sent: sent, Answer: time.Now()})
			w.mu.Lock()
			if !slices.Contains(w.holder[term.Token], term.Holder) {
				w.holder[term.Token] = append(w.holder[term.Token], term.Holder)
			}
			w.mu.Unlock()
			for _, g := range w.guards {
				err := g.write(term)
				w.mu.Lock()
				w.writes = append(w.writes, guardedWrite{g.where, term, err})
				w.mu.Unlock()
			}
		}
	})
}

// write is the application's write in term: the guard's check, then the
// row of data, in one transaction, committed only if the check passed.
func (g guardDB) write(term fence.TermID) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := g.guard.Check(ctx, tx, "orders", term); err != nil {
		return err
	}
	if g.data != "" {
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+g.data+` VALUES ($1, $2)`, term.Token, term.Holder); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// halt stops the samplers and waits for them.
func (w *failoverWatch) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// awaitWrite waits until a write in a term of holder has been answered by
// the outside guard, accepted or not, and returns the first such answer.
func (w *failoverWatch) awaitWrite(holder string, within time.Duration) guardedWrite {
	w.t.Helper()
	var found guardedWrite
	sidecartest.WaitTrue(w.t, "a guarded write of "+holder, within, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, g := range w.writes {
			if g.where == outside && g.term.Holder == holder {
				found = g
				return true
			}
		}
		return false
	})
	return found
}

// awaitAcceptedOnPair waits for a write of holder that the pair's guard
// accepted: one the pair's primary committed, which a replay then
// carries to the standby.
func (w *failoverWatch) awaitAcceptedOnPair(holder string, within time.Duration) {
	w.t.Helper()
	sidecartest.WaitTrue(w.t, "a write of "+holder+" accepted on the pair", within, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, g := range w.writes {
			if g.where == failedOver && g.err == nil && g.term.Holder == holder {
				return true
			}
		}
		return false
	})
}

// repeated lists the tokens claimed by more than one holder.
func (w *failoverWatch) repeated() map[int64][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int64][]string{}
	for tok, hs := range w.holder {
		if len(hs) > 1 {
			out[tok] = hs
		}
	}
	return out
}

// answers counts the answers of the guard in where per holder: accepted,
// refused as a reused token, refused as a stale one, failed otherwise.
// Only the pair's database may fail otherwise (while it fails over).
func (w *failoverWatch) answers(where string) map[string][4]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][4]int{}
	for _, g := range w.writes {
		if g.where != where {
			continue
		}
		n := out[g.term.Holder]
		switch {
		case g.err == nil:
			n[0]++
		case errors.Is(g.err, fence.ErrTokenReused):
			n[1]++
		case errors.Is(g.err, fence.ErrStaleToken):
			n[2]++
		default:
			n[3]++
			if where == outside {
				w.t.Errorf("guarded write in %v: %v", g.term, g.err)
			}
		}
		out[g.term.Holder] = n
	}
	return out
}

// summary is the claims and the guard's answers, for the test's log.
func (w *failoverWatch) summary() string {
	w.mu.Lock()
	var s string
	toks := make([]int64, 0, len(w.holder))
	for tok := range w.holder {
		toks = append(toks, tok)
	}
	slices.Sort(toks)
	for _, tok := range toks {
		s += fmt.Sprintf(" token %d claimed by %v;", tok, w.holder[tok])
	}
	w.mu.Unlock()
	for _, g := range w.guards {
		s += fmt.Sprintf(" the %s guard's answers per holder [accepted, reused, stale, failed]: %v;", g.where, w.answers(g.where))
	}
	return s
}

// Three sidecars on a primary with a synchronous standby: right after a
// hand-off gives a new term, the primary crashes (immediate shutdown). The
// standby has the new term's acquire (the sidecar claimed only once it
// was acknowledged), and once it is promoted the sidecars, following
// their two-host URL, elect a leader again with a token no lower. Every
// sidecar is sampled throughout: no token is claimed by two holders, no
// claim of an older term comes after a newer term's, and the guard never
// sees a token reused.
func TestPostgresFailoverToASynchronousStandby(t *testing.T) {
	t.Parallel()
	p := startFailoverPair(t, pgtest.Synchronous)
	w := newFailoverWatch(t, "failover_synchronous_guard")
	all := []*sidecartest.Sidecar{spawnOnPair(t, p), spawnOnPair(t, p), spawnOnPair(t, p)}
	for _, s := range all {
		w.add(s)
	}
	first, token := sidecartest.AwaitLeader(t, all, 3*sidecartest.LeaseDuration)
	w.log.AwaitSampled(t, token)

	first.Signal(syscall.SIGTERM)
	rest := sidecartest.Without(all, first)
	second, secondToken := sidecartest.AwaitLeader(t, rest, sidecartest.LeaseDuration)
	if secondToken != token+1 {
		t.Fatalf("after the hand-off: token %d, want %d", secondToken, token+1)
	}
	crashed := time.Now()
	if err := p.CrashPrimary(); err != nil {
		t.Fatal(err)
	}
	standby, err := sql.Open("pgx", p.Standby.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Close()
	var holder string
	var onStandby int64
	if err := standby.QueryRowContext(t.Context(), `SELECT holder, transitions FROM leader_records`).Scan(&holder, &onStandby); err != nil {
		t.Fatal(err)
	}
	if want := sidecartest.IdentityOf(t, second); holder != want || onStandby != secondToken {
		t.Fatalf("the standby's record when the primary crashed: holder %q token %d, want the term just acquired (%s, %d)", holder, onStandby, want, secondToken)
	}
	if err := p.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	promoted := time.Since(crashed)
	w.log.AwaitSampled(t, secondToken)
	// A leader again once the sidecars reach the promoted server: the term
	// acquired before the crash goes on if its leader renews there within
	// its renew deadline, else a new term begins one above it. Either way
	// a write lands there, with a renew time after the promotion.
	promotedAt := crashed.Add(promoted)
	var again time.Duration
	sidecartest.WaitTrue(t, "a record written on the promoted server", 3*sidecartest.LeaseDuration, func() bool {
		var renewed time.Time
		err := standby.QueryRowContext(t.Context(), `SELECT renew_time FROM leader_records`).Scan(&renewed)
		again = time.Since(crashed)
		return err == nil && renewed.After(promotedAt)
	})
	_, lastToken := sidecartest.AwaitLeader(t, rest, sidecartest.LeaseDuration)
	if lastToken < secondToken {
		t.Fatalf("after the failover: token %d, below the term acquired before it (%d)", lastToken, secondToken)
	}
	time.Sleep(sidecartest.RenewInterval) // a renewal more, sampled
	w.halt()

	terms := w.log.Check(t)
	if r := w.repeated(); len(r) > 0 {
		t.Fatalf("tokens claimed by two holders: %v", r)
	}
	for holder, n := range w.answers(outside) {
		if n[1] > 0 {
			t.Errorf("the guard refused %d writes of %s as a reused token", n[1], holder)
		}
	}
	t.Logf("promoted %v after the crash; a record written on it %v after the crash; leader with token %d (the term before the crash: %d); answers per term %v;%s",
		promoted.Round(time.Millisecond), again.Round(time.Millisecond), lastToken, secondToken, terms, w.summary())
}

// lagging is what failOverBehind saw.
type lagging struct {
	p            *pgtest.Pair
	w            *failoverWatch
	first        int64  // the token of the term the standby has
	early, later string // the sidecar started while the standby was cut off, and the leader after the failover
	earlyClaimed bool
	lastToken    int64
	crashed      time.Time
}

// failOverBehind runs the failover that an asynchronous standby gets
// wrong. Sidecar A leads, and the standby has its term; the standby is
// then cut off from the primary, as one that lags. A is killed, and
// sidecar B, started then, may acquire the next term once A's lease has
// run out. The primary crashes and B goes with it (as on the primary's
// machine), so that no running candidate remembers B's token; the
// standby is promoted, and two new sidecars elect a leader on it. Every claim is followed by a
// guarded write outside the pair and one, with a row of data, in it.
func failOverBehind(t *testing.T, mode pgtest.Replication) lagging {
	t.Helper()
	p := startFailoverPair(t, mode)
	w := newFailoverWatch(t, "failover_"+mode.String()+"_behind_guard")
	w.guardOnPair(p, "guard", "orders")
	if err := p.AwaitReplayed(t.Context()); err != nil {
		t.Fatal(err)
	}
	a := spawnOnPair(t, p)
	w.add(a)
	_, first := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{a}, 3*sidecartest.LeaseDuration)
	if g := w.awaitWrite(sidecartest.IdentityOf(t, a), sidecartest.LeaseDuration); g.err != nil {
		t.Fatalf("the first leader's guarded write: %v", g.err)
	}
	// The standby must hold a write of A's before it is cut off: on a
	// loaded machine the pair's write can come well after the one outside.
	w.awaitAcceptedOnPair(sidecartest.IdentityOf(t, a), 3*sidecartest.LeaseDuration)
	if err := p.AwaitReplayed(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.CutStandby(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.Signal(syscall.SIGKILL)
	a.WaitExit(10 * time.Second)

	b := spawnOnPair(t, p)
	early := sidecartest.IdentityOf(t, b)
	w.add(b)
	// B leads a lease after it started, or, where its acquire waits for the
	// standby, not at all: twice that bounds the wait, which ends once the
	// guard outside has answered a write of B's and the pair's guard has
	// accepted one (on a loaded machine the second can come tens of
	// milliseconds after the first).
	earlyClaimed, earlyOnPair := false, false
	for deadline := time.Now().Add(2*sidecartest.LeaseDuration + time.Second); time.Now().Before(deadline) && !(earlyClaimed && earlyOnPair); time.Sleep(10 * time.Millisecond) {
		w.mu.Lock()
		for _, g := range w.writes {
			if g.term.Holder == early {
				earlyClaimed = earlyClaimed || g.where == outside
				earlyOnPair = earlyOnPair || (g.where == failedOver && g.err == nil)
			}
		}
		w.mu.Unlock()
	}
	for _, c := range w.log.Claims() {
		earlyClaimed = earlyClaimed || c.Who == early
	}
	crashed := time.Now()
	if err := p.CrashPrimary(); err != nil {
		t.Fatal(err)
	}
	b.Signal(syscall.SIGKILL)
	b.WaitExit(10 * time.Second)
	if err := p.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}

	after := []*sidecartest.Sidecar{spawnOnPair(t, p), spawnOnPair(t, p)}
	for _, s := range after {
		w.add(s)
	}
	leader, lastToken := sidecartest.AwaitLeader(t, after, 3*sidecartest.LeaseDuration)
	later := sidecartest.IdentityOf(t, leader)
	w.awaitWrite(later, sidecartest.LeaseDuration)
	time.Sleep(sidecartest.RenewInterval) // a renewal more, sampled
	w.halt()
	if n, longest := w.log.Overlaps(); n > 0 {
		t.Errorf("%d claims of an older term were sent after a newer term had claimed (longest %v after)", n, longest)
	}
	return lagging{p: p, w: w, first: first, early: early, later: later, earlyClaimed: earlyClaimed, lastToken: lastToken, crashed: crashed}
}

// With a synchronous standby, the term B would have begun while the
// standby lagged never begins: its acquire waits for the standby, so B
// never claims. After the failover the new leader's token is one above
// A's, claimed by one holder only, and the guard accepts its writes.
func TestPostgresFailoverToALaggingSynchronousStandbyRepeatsNoToken(t *testing.T) {
	t.Parallel()
	r := failOverBehind(t, pgtest.Synchronous)
	if r.earlyClaimed {
		t.Errorf("B claimed a term while the synchronous standby was cut off: its acquire was acknowledged without the standby")
	}
	if rep := r.w.repeated(); len(rep) > 0 {
		t.Errorf("tokens claimed by two holders: %v", rep)
	}
	if r.lastToken != r.first+1 {
		t.Errorf("after the failover: token %d, want %d", r.lastToken, r.first+1)
	}
	if n := r.w.answers(outside)[r.later]; n[0] == 0 || n[1] > 0 {
		t.Errorf("the guard's answers to the new leader [accepted, reused, stale]: %v, want its writes accepted", n)
	}
	t.Logf("first term %d;%s", r.first, r.w.summary())
}

// With an asynchronous standby, the danger the backend's requirement
// removes: B's term is acknowledged on the primary alone, the promoted
// standby still names A's, and the new leader, which never saw B's
// token, claims the same token. The guard, whose database did not fail
// over, had accepted B's writes with it, and refuses every write of the
// new leader as a reused token. A guard in the pair's database, with the
// records, lost B's writes with B's term, and accepts token 2 after the
// failover from one holder only.
func TestPostgresFailoverToALaggingAsynchronousStandbyRepeatsATokenTheGuardRefuses(t *testing.T) {
	t.Parallel()
	r := failOverBehind(t, pgtest.Asynchronous)
	if !r.earlyClaimed {
		t.Fatalf("B never claimed while the asynchronous standby was cut off; the scenario did not happen:%s", r.w.summary())
	}
	rep := r.w.repeated()
	if hs := rep[r.first+1]; len(hs) != 2 || hs[0] != r.early || hs[1] != r.later {
		t.Fatalf("token %d claimed by %v, want B (%s) then the new leader (%s); repeated: %v", r.first+1, hs, r.early, r.later, rep)
	}
	answers := r.w.answers(outside)
	if n := answers[r.early]; n[0] == 0 {
		t.Errorf("the guard's answers to B [accepted, reused, stale]: %v, want its writes accepted", n)
	}
	if n := answers[r.later]; n[0] > 0 || n[1] == 0 {
		t.Errorf("the guard's answers to the new leader [accepted, reused, stale, failed]: %v, want every write refused as a reused token", n)
	}
	// The pair's database lost B's writes made before the crash together
	// with B's term (the standby has a prefix of the primary's WAL, and B
	// wrote only after its acquire), and kept A's. After the failover, the
	// first holder to write there with token 2 binds it: the new leader,
	// or B's application, whose last write in flight can land on the
	// promoted server; never both.
	onPair := r.w.answers(failedOver)
	if n := onPair[r.early]; n[0] == 0 {
		t.Errorf("the pair's guard's answers to B: %v, want its writes accepted before the crash", n)
	}
	db, err := sql.Open("pgx", r.p.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var beforeA, beforeB, after, holders int
	if err := db.QueryRowContext(t.Context(), `SELECT
		count(*) FILTER (WHERE at < $1 AND holder <> $2),
		count(*) FILTER (WHERE at < $1 AND holder = $2),
		count(*) FILTER (WHERE at >= $1),
		count(DISTINCT holder) FILTER (WHERE token = $3)
		FROM orders`, r.crashed, r.early, r.first+1).Scan(&beforeA, &beforeB, &after, &holders); err != nil {
		t.Fatal(err)
	}
	if beforeA == 0 || beforeB != 0 {
		t.Errorf("the promoted server holds %d rows of A and %d of B written before the crash, want A's and none of B's", beforeA, beforeB)
	}
	if holders != 1 {
		t.Errorf("the promoted server holds rows of token %d from %d holders, want one", r.first+1, holders)
	}
	if n := onPair[r.later]; n[0] > 0 && n[1] > 0 {
		t.Errorf("the pair's guard both accepted and refused the new leader: %v", n)
	}
	t.Logf("first term %d;%s rows on the promoted server: %d of A and %d of B written before the crash, %d after, of token %d from %d holder",
		r.first, r.w.summary(), beforeA, beforeB, after, r.first+1, holders)
}
