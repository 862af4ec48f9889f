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
// fail over.

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

// guardedWrite is one write of the application through the guard.
type guardedWrite struct {
	term fence.TermID
	err  error // nil: accepted
}

// failoverWatch samples sidecars and writes through the guard for them.
type failoverWatch struct {
	t      *testing.T
	guard  *fence.SQLGuard
	db     *sql.DB
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
	w := &failoverWatch{t: t, guard: guard, db: db, stop: make(chan struct{}), holder: map[int64][]string{}}
	t.Cleanup(w.halt)
	return w
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
			err = w.write(term)
			w.mu.Lock()
			if !slices.Contains(w.holder[term.Token], term.Holder) {
				w.holder[term.Token] = append(w.holder[term.Token], term.Holder)
			}
			w.writes = append(w.writes, guardedWrite{term, err})
			w.mu.Unlock()
		}
	})
}

// write is the application's write in term: the guard's check in its own
// transaction, committed only if the check passed.
func (w *failoverWatch) write(term fence.TermID) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := w.guard.Check(ctx, tx, "orders", term); err != nil {
		return err
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
// the guard, accepted or not, and returns the first such answer.
func (w *failoverWatch) awaitWrite(holder string, within time.Duration) guardedWrite {
	w.t.Helper()
	var found guardedWrite
	sidecartest.WaitTrue(w.t, "a guarded write of "+holder, within, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, g := range w.writes {
			if g.term.Holder == holder {
				found = g
				return true
			}
		}
		return false
	})
	return found
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

// answers counts the guard's answers per holder: accepted, refused as a
// reused token, refused as a stale one.
func (w *failoverWatch) answers() map[string][3]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][3]int{}
	for _, g := range w.writes {
		n := out[g.term.Holder]
		switch {
		case g.err == nil:
			n[0]++
		case errors.Is(g.err, fence.ErrTokenReused):
			n[1]++
		case errors.Is(g.err, fence.ErrStaleToken):
			n[2]++
		default:
			w.t.Errorf("guarded write in %v: %v", g.term, g.err)
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
	return s + fmt.Sprintf(" guard answers per holder [accepted, reused, stale]: %v", w.answers())
}

// Three sidecars on a primary with a synchronous standby: right after a
// hand-off gives a new term, the primary crashes (immediate shutdown) and
// the standby is promoted. The sidecars follow the promotion through
// their two-host URL, a leader runs again, the term acquired just before
// the crash survives it, and throughout, sampling every sidecar, no token
// is claimed by two holders, no claim of an older term comes after a newer
// term's, and the guard never sees a token reused.
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
	if err := p.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	promoted := time.Since(crashed)
	w.log.AwaitSampled(t, secondToken)
	// A leader again, once the sidecars reach the promoted server: the
	// renewal of the term acquired before the crash lands there, since its
	// acquire is on the standby.
	var again time.Duration
	sidecartest.WaitTrue(t, "a renewal on the promoted server", 3*sidecartest.LeaseDuration, func() bool {
		db, err := sql.Open("pgx", p.Standby.DSN)
		if err != nil {
			return false
		}
		defer db.Close()
		var holder string
		var tok int64
		var renewed time.Time
		err = db.QueryRowContext(t.Context(), `SELECT holder, transitions, renew_time FROM leader_records`).Scan(&holder, &tok, &renewed)
		if err != nil || !renewed.After(crashed) {
			return false
		}
		again = time.Since(crashed)
		if holder != sidecartest.IdentityOf(t, second) || tok != secondToken {
			t.Fatalf("the promoted server's record: holder %q token %d, want the term acquired before the crash (%d)", holder, tok, secondToken)
		}
		return true
	})
	leader, lastToken := sidecartest.AwaitLeader(t, rest, sidecartest.LeaseDuration)
	if leader != second || lastToken != secondToken {
		t.Fatalf("after the failover: token %d, want the term acquired before it (%d) to go on", lastToken, secondToken)
	}
	w.awaitWrite(sidecartest.IdentityOf(t, second), sidecartest.LeaseDuration)
	time.Sleep(sidecartest.RenewInterval) // a renewal more, sampled
	w.halt()

	terms := w.log.Check(t)
	if r := w.repeated(); len(r) > 0 {
		t.Fatalf("tokens claimed by two holders: %v", r)
	}
	for holder, n := range w.answers() {
		if n[1] > 0 {
			t.Errorf("the guard refused %d writes of %s as a reused token", n[1], holder)
		}
	}
	t.Logf("promoted %v after the crash; the term acquired before it renewed on the promoted server %v after the crash; answers per term %v;%s",
		promoted.Round(time.Millisecond), again.Round(time.Millisecond), terms, w.summary())
}

// lagging is what failOverBehind saw.
type lagging struct {
	w            *failoverWatch
	first        int64  // the token of the term the standby has
	early, later string // the sidecar started while the standby was cut off, and the leader after the failover
	earlyClaimed bool
	lastToken    int64
}

// failOverBehind runs the failover that an asynchronous standby gets
// wrong. Sidecar A leads, and the standby has its term; the standby is
// then cut off from the primary, as one that lags. A stops (SIGTERM: it
// releases), and sidecar B, started then, may acquire the next term. The
// primary crashes and B goes with it (as on the primary's machine), so
// that no running candidate remembers B's token; the standby is promoted,
// and two new sidecars elect a leader on it.
func failOverBehind(t *testing.T, mode pgtest.Replication) lagging {
	t.Helper()
	p := startFailoverPair(t, mode)
	w := newFailoverWatch(t, "failover_"+mode.String()+"_behind_guard")
	a := spawnOnPair(t, p)
	w.add(a)
	_, first := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{a}, 3*sidecartest.LeaseDuration)
	if g := w.awaitWrite(sidecartest.IdentityOf(t, a), sidecartest.LeaseDuration); g.err != nil {
		t.Fatalf("the first leader's guarded write: %v", g.err)
	}
	if err := p.AwaitReplayed(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.CutStandby(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.Signal(syscall.SIGTERM)
	a.WaitExit(20 * time.Second)

	b := spawnOnPair(t, p)
	early := sidecartest.IdentityOf(t, b)
	w.add(b)
	// B leads at once on the release, or, where the release waits for the
	// standby, not at all; two leases bound the wait either way.
	earlyClaimed := false
	for deadline := time.Now().Add(2 * sidecartest.LeaseDuration); time.Now().Before(deadline) && !earlyClaimed; time.Sleep(10 * time.Millisecond) {
		w.mu.Lock()
		for _, g := range w.writes {
			earlyClaimed = earlyClaimed || g.term.Holder == early
		}
		w.mu.Unlock()
	}
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
	return lagging{w: w, first: first, early: early, later: later, earlyClaimed: earlyClaimed, lastToken: lastToken}
}

// With a synchronous standby, the term B would have begun while the
// standby lagged never begins: its acquire (the release before it, too)
// waits for the standby, so B never claims. After the failover the new
// leader's token is one above A's, claimed by one holder only, and the
// guard accepts its writes.
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
	if n := r.w.answers()[r.later]; n[0] == 0 || n[1] > 0 {
		t.Errorf("the guard's answers to the new leader [accepted, reused, stale]: %v, want its writes accepted", n)
	}
	t.Logf("first term %d;%s", r.first, r.w.summary())
}

// With an asynchronous standby, the danger the backend's requirement
// removes: B's term is acknowledged on the primary alone, the promoted
// standby still names A's, and the new leader, which never saw B's
// token, claims the same token. The guard, whose database did not fail
// over, had accepted B's writes with it, and refuses every write of the
// new leader as a reused token.
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
	answers := r.w.answers()
	if n := answers[r.early]; n[0] == 0 {
		t.Errorf("the guard's answers to B [accepted, reused, stale]: %v, want its writes accepted", n)
	}
	if n := answers[r.later]; n[0] > 0 || n[1] == 0 {
		t.Errorf("the guard's answers to the new leader [accepted, reused, stale]: %v, want every write refused as a reused token", n)
	}
	t.Logf("first term %d;%s", r.first, r.w.summary())
}
