package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// Bounds of the chaos run (see TestChaos).
const (
	// recoveryBound: a standby takes a record over once it has seen it
	// unchanged for a lease duration on its own clock. The leader's last
	// renewal was at most 1.2 retry periods (jittered retry) before the
	// fault; the standby notices expiry at its next attempt, at most 1.2
	// retry periods after the lease ran out; one more second covers
	// sampling, process scheduling and -race on two shared cores.
	recoveryBound = leaseDuration + 3*retryPeriod + time.Second
	// demoteBound: a leader cut off from its store (or its store stopped)
	// claims only until renewDeadline after the start of its last
	// successful renewal, which began before the fault; 500ms covers the
	// sampling interval and scheduling.
	demoteBound = renewDeadline + 500*time.Millisecond
	// deletionOverlap: deleting the Lease bypasses compare-and-swap, so the
	// old leader cannot know; it claims its term until its next attempt (a
	// retry period) finds the new record. Same allowance as
	// TestLeaseDeletedIsRecreatedAboveTheLastToken.
	deletionOverlap = retryPeriod + 300*time.Millisecond
	// settledFor: after recovery, exactly one leader with the expected
	// token in every sweep for this long (longer than a renew deadline, so
	// a wrongly demoting leader would show).
	settledFor = renewDeadline + retryPeriod
	// lookback: each fault's overlap check also covers this much of the
	// previous fault's settled tail, so no overlap hides at a boundary.
	lookback = time.Second
	// runBound bounds the whole run.
	runBound = 150 * time.Second
)

// chaosMember is one sidecar of the chaos run and its own proxy.
type chaosMember struct {
	i      int
	pod    string
	s      *sidecar
	px     *tcpProxy
	killed atomic.Bool // killed on purpose: its errors are expected
	paused atomic.Bool // SIGSTOPped: its requests hang
}

// chaosWrite is one write the guard accepted.
type chaosWrite struct {
	who   int
	token int64
	at    time.Time
}

// chaos is the running fleet, its samplers and writers.
type chaos struct {
	t        *testing.T
	k        *kubeEnv
	ns, name string
	upstream string // lease: the API server's host:port
	tlsName  string
	db       string // sqlite: the election's file
	seed     uint64
	stop     chan struct{}
	wg       sync.WaitGroup

	mu       sync.Mutex
	members  []*chaosMember
	answers  []answer // every /leader answer, per member in sampling order
	failed   []error  // a live, running sidecar that did not answer
	samples  int
	guard    fence.MemoryGuard
	accepted []chaosWrite // in the order the guard accepted them
	rejected int
	writeErr []error // a write refused for another reason than a stale token
}

// kubeconfigVia writes a kubeconfig whose server is the proxy p; the
// server name stays the API server's, so its certificate still verifies.
func (c *chaos) kubeconfigVia(p *tcpProxy) string {
	c.t.Helper()
	cfg := c.k.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{
		Server:                   "https://" + p.addr(),
		CertificateAuthorityData: cfg.CAData,
		TLSServerName:            c.tlsName,
	}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(c.t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// add starts a sidecar behind a proxy of its own, its sampler and its
// writer.
func (c *chaos) add() *chaosMember {
	c.t.Helper()
	c.mu.Lock()
	i := len(c.members)
	c.mu.Unlock()
	m := &chaosMember{i: i, pod: fmt.Sprintf("app-%d", i)}
	if c.db != "" {
		m.s = start(c.t, c.db)
	} else {
		m.px = newProxy(c.t, c.upstream)
		m.s = leaseSidecar(c.t, c.kubeconfigVia(m.px), c.ns, c.name, m.pod)
	}
	c.mu.Lock()
	c.members = append(c.members, m)
	c.mu.Unlock()
	c.wg.Go(func() { c.sample(m) })
	rng := rand.New(rand.NewPCG(c.seed, uint64(i)))
	c.wg.Go(func() { c.write(m, rng) })
	return m
}

func (c *chaos) stopped(d time.Duration) bool {
	select {
	case <-c.stop:
		return true
	case <-time.After(d):
		return false
	}
}

// sample asks m's sidecar GET /leader every 5ms and keeps every answer.
func (c *chaos) sample(m *chaosMember) {
	for !c.stopped(5 * time.Millisecond) {
		if m.killed.Load() && !m.s.alive() {
			return
		}
		sent := time.Now()
		st, err := m.s.leader()
		c.mu.Lock()
		c.samples++
		if err == nil {
			c.answers = append(c.answers, answer{m.i, st, sent, time.Now()})
		} else if m.s.alive() && !m.killed.Load() && !m.paused.Load() {
			c.failed = append(c.failed, fmt.Errorf("%s at %v: %w", m.pod, sent.Format(time.StampMilli), err))
		}
		c.mu.Unlock()
	}
}

// write is the application next to m's sidecar: whenever the sidecar says
// it leads with token T, it works a little (0-40ms, holding T) and then
// writes the resource "chaos" through the shared guard with T.
func (c *chaos) write(m *chaosMember, rng *rand.Rand) {
	for !c.stopped(15 * time.Millisecond) {
		if m.killed.Load() && !m.s.alive() {
			return
		}
		st, err := m.s.leader()
		if err != nil || !st.Leader || st.Token == nil {
			continue
		}
		tok := *st.Token
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
		err = c.guard.Do("chaos", tok, func() error {
			// Under the guard's lock: the order of this slice is the order
			// in which the guard accepted the writes.
			c.mu.Lock()
			c.accepted = append(c.accepted, chaosWrite{m.i, tok, time.Now()})
			c.mu.Unlock()
			return nil
		})
		c.mu.Lock()
		switch {
		case errors.Is(err, fence.ErrStaleToken):
			c.rejected++
		case err != nil:
			c.writeErr = append(c.writeErr, err)
		}
		c.mu.Unlock()
	}
}

func (c *chaos) halt() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.wg.Wait()
}

// live is every sidecar that was neither killed nor is paused.
func (c *chaos) live() []*sidecar {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*sidecar
	for _, m := range c.members {
		if !m.killed.Load() && !m.paused.Load() {
			out = append(out, m.s)
		}
	}
	return out
}

func (c *chaos) member(s *sidecar) *chaosMember {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		if m.s == s {
			return m
		}
	}
	c.t.Fatalf("no member for sidecar %d", s.cmd.Process.Pid)
	return nil
}

// window is every answer sent in [from, to).
func (c *chaos) window(from, to time.Time) []answer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []answer
	for _, a := range c.answers {
		if !a.sent.Before(from) && a.sent.Before(to) {
			out = append(out, a)
		}
	}
	return out
}

// checkWindow runs the recorder's overlap check on the answers sent in
// [from, to): no token below floor, no token claimed by two sidecars, and
// no older term claimed more than overlap after a newer term's first claim
// arrived. It returns the claims and the longest overlap.
func (c *chaos) checkWindow(from, to time.Time, floor int64, overlap time.Duration) ([]answer, time.Duration) {
	c.t.Helper()
	c.mu.Lock()
	failed := append([]error(nil), c.failed...)
	c.mu.Unlock()
	r := &recorder{answers: c.window(from, to), failed: failed, stop: make(chan struct{})}
	claims, _, longest := r.check(c.t, floor, overlap)
	return claims, longest
}

// lastClaimBy is when the last claim of tok by member who (among answers) was sent, after
// from; zero if none.
func lastClaimBy(claims []answer, who int, tok int64, from time.Time) time.Time {
	var last time.Time
	for _, c := range claims {
		if c.st.Leader && c.st.Token != nil && c.who == who && *c.st.Token == tok && c.sent.After(from) && c.sent.After(last) {
			last = c.sent
		}
	}
	return last
}

// faultResult is one row of the figures.
type faultResult struct {
	fault            string
	before, after    string        // holder pod and token
	demoted          time.Duration // old leader's last claim after the fault began (-1: n/a)
	recovered        time.Duration // fault start (or API server up) to one leader again
	overlap, allowed time.Duration
	claims           int
	note             string
}

// TestChaos runs a bounded chaos schedule against sidecars on one Lease,
// each talking to the API server through a TCP proxy of its own. Faults,
// in an order drawn from a seed (CHAOS_SEED to replay one):
//
//	kill      SIGKILL of the leader; a standby takes over with token t+1;
//	          a replacement sidecar (new proxy) joins
//	pause     SIGSTOP of the leader for more than a lease duration; a standby
//	          takes over with t+1; after SIGCONT the old leader's first answers
//	          are leader:false
//	apiserver kube-apiserver stopped and started again; nobody leads while it
//	          is down; afterwards one leader, t if the same holder, else t+1
//	partition the leader's proxy closes its connections and holds new ones for
//	          more than the renew deadline (until a standby leads with t+1),
//	          then heals; the old leader stays a follower
//	delete    the Lease is deleted; it is recreated with t+1
//
// Invariants, checked per fault on every /leader answer (sampled every 5ms
// per sidecar) and over the whole run: no older term claimed after a newer
// term's first claim arrived (zero allowance, except deletion: the old
// leader cannot know until its next attempt, up to deletionOverlap); a
// demoted leader stops claiming within demoteBound; no token claimed by two
// sidecars; tokens never decrease per sidecar; the shared guard accepted
// writes in non-decreasing token order and finally holds the last term's
// token; one leader again within recoveryBound after each fault (after the
// API server's Start returned, for the restart); every sidecar alive at
// the end except the killed one, which died of SIGKILL.
//
// The sqlite variant runs kill, pause and storelock (another process holds
// SQLite's write lock for more than a lease duration, the file-backend
// analogue of the API server outage) with the same invariants.
func TestChaos(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED: %v", err)
		}
	}
	t.Run("lease", func(t *testing.T) {
		k := kube(t)
		u, err := url.Parse(k.Config.Host)
		if err != nil {
			t.Fatal(err)
		}
		c := &chaos{t: t, k: k, ns: k.namespace(t), name: "chaos", upstream: u.Host, tlsName: u.Hostname(),
			seed: seed, stop: make(chan struct{})}
		t.Cleanup(c.halt)
		c.run([]string{"kill", "pause", "apiserver", "partition", "delete"})
	})
	t.Run("sqlite", func(t *testing.T) {
		c := &chaos{t: t, db: dbPath(t), seed: seed, stop: make(chan struct{})}
		t.Cleanup(c.halt)
		c.run([]string{"kill", "pause", "storelock"})
	})
}

// run starts three sidecars and injects faults in an order drawn from
// the seed.
func (c *chaos) run(faults []string) {
	t, seed := c.t, c.seed
	rng := rand.New(rand.NewPCG(seed, 0))
	rng.Shuffle(len(faults), func(i, j int) { faults[i], faults[j] = faults[j], faults[i] })
	quiet := make([]time.Duration, len(faults))
	for i := range quiet {
		quiet[i] = time.Duration(rng.IntN(500)) * time.Millisecond
	}
	t.Logf("CHAOS_SEED=%d schedule: %s (quiet before each: %v); lease %v, renew deadline %v, retry %v",
		seed, strings.Join(faults, " -> "), quiet, leaseDuration, renewDeadline, retryPeriod)

	begin := time.Now()
	for range 3 {
		c.add()
	}
	leader, token := awaitLeader(t, c.live(), 15*time.Second)
	phaseStart := time.Now()
	var results []faultResult
	for i, f := range faults {
		if time.Since(begin) > runBound {
			t.Fatalf("chaos run past its bound of %v before %s", runBound, f)
		}
		awaitSettled(t, c.live(), leader)
		time.Sleep(quiet[i])
		var r faultResult
		prev := token
		switch f {
		case "kill":
			r, leader, token = c.kill(leader, token)
		case "pause":
			r, leader, token = c.pause(leader, token)
		case "apiserver":
			r, leader, token = c.apiserver(leader, token)
		case "partition":
			r, leader, token = c.partition(leader, token)
		case "delete":
			r, leader, token = c.deleteLease(leader, token)
		case "storelock":
			r, leader, token = c.storeLock(leader, token)
		default:
			t.Fatalf("unknown fault %q", f)
		}
		end := time.Now()
		claims, longest := c.checkWindow(phaseStart.Add(-lookback), end, prev, r.allowed)
		r.overlap, r.claims = longest, len(claims)
		results = append(results, r)
		t.Logf("%s: %s -> %s, one leader again after %v", f, r.before, r.after, r.recovered.Round(time.Millisecond))
		phaseStart = end
	}
	if c.k != nil {
		leaseShows(t, c.k, c.ns, c.name, identityOf(t, leader), token)
	}
	// The final leader's writer has had the settled period to write.
	waitTrue(t, "the guard holds the final token", 2*time.Second, func() bool {
		h, ok := c.guard.Highest("chaos")
		return ok && h == token
	})
	c.halt()
	c.final(t, results, token, time.Since(begin))
}

// final checks the whole run's invariants and prints the figures.
func (c *chaos) final(t *testing.T, results []faultResult, token int64, took time.Duration) {
	t.Helper()
	// Whole run: the recorder's check with the largest allowance (the
	// per-fault checks held the others to zero).
	claims, _ := c.checkWindow(time.Time{}, time.Now(), 1, deletionOverlap)

	// Tokens never decrease per sidecar (answers of one sidecar are in the
	// order its sampler made them).
	last := map[int]int64{}
	terms := map[int64]int{}
	for _, a := range claims {
		tok := *a.st.Token
		if tok < last[a.who] {
			t.Fatalf("sidecar %d claimed token %d after %d", a.who, tok, last[a.who])
		}
		last[a.who] = tok
		terms[tok]++
	}

	// The guard accepted writes in non-decreasing token order.
	c.mu.Lock()
	accepted, rejected, writeErr := c.accepted, c.rejected, c.writeErr
	c.mu.Unlock()
	if len(writeErr) > 0 {
		t.Fatalf("a guarded write failed for another reason than a stale token: %v", writeErr[0])
	}
	perToken := map[int64]int{}
	for i, w := range accepted {
		if i > 0 && w.token < accepted[i-1].token {
			t.Fatalf("the guard accepted token %d (sidecar %d, %v) after token %d",
				w.token, w.who, w.at.Format(time.StampMilli), accepted[i-1].token)
		}
		perToken[w.token]++
	}
	if len(accepted) == 0 || accepted[len(accepted)-1].token != token {
		t.Fatalf("the last accepted write is not of the final term %d (%d writes)", token, len(accepted))
	}

	// No sidecar crashed; the killed ones died of SIGKILL.
	killed := 0
	for _, m := range c.members {
		if strings.Contains(m.s.logs.String(), "panic") {
			t.Fatalf("%s logged a panic:\n%s", m.pod, m.s.logs.String())
		}
		if !m.killed.Load() {
			if !m.s.alive() {
				t.Fatalf("%s exited: %v\n%s", m.pod, m.s.exitErr, m.s.logs.String())
			}
			continue
		}
		killed++
		ws, ok := m.s.cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("%s, killed on purpose, ended with %v", m.pod, m.s.cmd.ProcessState)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n%-10s %-12s %-12s %10s %10s %9s %9s %7s  %s\n",
		"fault", "before", "after", "demoted", "recovered", "overlap", "allowed", "claims", "note")
	for _, r := range results {
		demoted := "-"
		if r.demoted >= 0 {
			demoted = r.demoted.Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "%-10s %-12s %-12s %10s %10v %9v %9v %7d  %s\n", r.fault, r.before, r.after, demoted,
			r.recovered.Round(time.Millisecond), r.overlap.Round(time.Millisecond), r.allowed, r.claims, r.note)
	}
	fmt.Fprintf(&b, "run %v; sidecars %d (killed %d); samples %d, answers %d, claims %d over %d terms %v\n",
		took.Round(time.Millisecond), len(c.members), killed, c.samples, len(c.answers), len(claims), len(terms), terms)
	fmt.Fprintf(&b, "guarded writes: accepted %d (per token %v), rejected as stale %d; final token %d",
		len(accepted), perToken, rejected, token)
	t.Log(b.String())
}

func (c *chaos) label(s *sidecar, tok int64) string {
	return fmt.Sprintf("%s:%d", c.member(s).pod, tok)
}

// expectNext waits for exactly one leader with token want among live and
// fails t unless it is not old (when old is non-nil).
func (c *chaos) expectNext(old *sidecar, want int64, from time.Time) (*sidecar, time.Duration) {
	c.t.Helper()
	s := awaitToken(c.t, c.live(), want, recoveryBound-time.Since(from))
	took := time.Since(from)
	if old != nil && s == old {
		c.t.Fatalf("the old leader %s leads again with token %d", c.member(old).pod, want)
	}
	return s, took
}

func (c *chaos) kill(old *sidecar, tok int64) (faultResult, *sidecar, int64) {
	t := c.t
	t.Helper()
	m := c.member(old)
	m.killed.Store(true)
	at := time.Now()
	old.signal(syscall.SIGKILL)
	old.waitExit(5 * time.Second)
	s, took := c.expectNext(old, tok+1, at)
	if took < leaseDuration-2*retryPeriod {
		t.Fatalf("taken over %v after the kill, before the lease could have run out", took)
	}
	steady(t, c.live(), s, tok+1, settledFor)
	n := c.add()
	steady(t, c.live(), s, tok+1, retryPeriod)
	return faultResult{fault: "kill", before: c.label(old, tok), after: c.label(s, tok+1), demoted: -1, recovered: took,
		note: "replacement " + n.pod + " joined"}, s, tok + 1
}

func (c *chaos) pause(old *sidecar, tok int64) (faultResult, *sidecar, int64) {
	t := c.t
	t.Helper()
	m := c.member(old)
	m.paused.Store(true)
	at := time.Now()
	old.signal(syscall.SIGSTOP)
	s, took := c.expectNext(old, tok+1, at)
	if took < leaseDuration-2*retryPeriod {
		t.Fatalf("taken over %v after the pause, before the lease could have run out", took)
	}
	if d := leaseDuration + 500*time.Millisecond - time.Since(at); d > 0 {
		time.Sleep(d)
	}
	cont := time.Now()
	old.signal(syscall.SIGCONT)
	m.paused.Store(false)
	steady(t, c.live(), s, tok+1, settledFor)
	// Requests the sampler sent while the leader was frozen were answered
	// after it woke: each must disown the term.
	woke := 0
	for _, a := range c.window(at, time.Now()) {
		if a.who == m.i && a.at.After(cont) && a.sent.Before(cont) {
			woke++
			if a.st.Leader {
				t.Fatalf("%s answered leader:true (token %v) on waking from a %v pause",
					m.pod, deref(a.st.Token), cont.Sub(at).Round(time.Millisecond))
			}
		}
	}
	return faultResult{fault: "pause", before: c.label(old, tok), after: c.label(s, tok+1), demoted: -1, recovered: took,
		note: fmt.Sprintf("paused %v; %d answers on waking, all leader:false", cont.Sub(at).Round(time.Millisecond), woke)}, s, tok + 1
}

func (c *chaos) partition(old *sidecar, tok int64) (faultResult, *sidecar, int64) {
	t := c.t
	t.Helper()
	m := c.member(old)
	at := time.Now()
	m.px.cut()
	s, took := c.expectNext(old, tok+1, at)
	if d := renewDeadline + 500*time.Millisecond - time.Since(at); d > 0 {
		time.Sleep(d)
	}
	healed := time.Now()
	m.px.heal()
	steady(t, c.live(), s, tok+1, settledFor)
	demoted := lastClaimBy(c.window(at, time.Now()), m.i, tok, at).Sub(at)
	if demoted > demoteBound {
		t.Fatalf("%s, cut off from the API server, claimed token %d %v after the cut (bound %v)", m.pod, tok, demoted, demoteBound)
	}
	return faultResult{fault: "partition", before: c.label(old, tok), after: c.label(s, tok+1), demoted: max(demoted, 0), recovered: took,
		note: fmt.Sprintf("cut %v, %d connections held", healed.Sub(at).Round(time.Millisecond), m.px.heldCount.Load())}, s, tok + 1
}

func (c *chaos) deleteLease(old *sidecar, tok int64) (faultResult, *sidecar, int64) {
	t := c.t
	t.Helper()
	at := time.Now()
	if err := c.k.client.CoordinationV1().Leases(c.ns).Delete(context.Background(), c.name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the Lease: %v", err)
	}
	// Standbys see the deletion through their watch and recreate at once;
	// the old leader would at its next attempt.
	s := awaitToken(t, c.live(), tok+1, 2*retryPeriod+time.Second)
	took := time.Since(at)
	steady(t, c.live(), s, tok+1, settledFor)
	demoted := lastClaimBy(c.window(at, time.Now()), c.member(old).i, tok, at).Sub(at)
	if demoted > deletionOverlap {
		t.Fatalf("token %d still claimed %v after the deletion (allowed %v)", tok, demoted, deletionOverlap)
	}
	return faultResult{fault: "delete", before: c.label(old, tok), after: c.label(s, tok+1), demoted: max(demoted, 0), recovered: took,
		allowed: deletionOverlap, note: fmt.Sprintf("recreated by the old leader: %v", s == old)}, s, tok + 1
}

// awaitAgain waits, from up (the store is back), for one leader: the old
// holder with its token or another with the next, then for it to stay.
//
// A leader counts once its claim is fresh: valid for more than a retry
// period still. A renewal that began while the store was unavailable and
// went through only once it was back (SQLite: blocked on the write lock)
// makes the sidecar lead for what is left of a window that began before:
// it answers leader:true for a few milliseconds, then leader:false until
// its next renewal. That is the self-demotion rule at work, not a second
// leader (the recorder checks overlaps); the first such claim is reported
// as firstSeen.
func (c *chaos) awaitAgain(old *sidecar, tok int64, up time.Time) (s *sidecar, next int64, took, firstSeen time.Duration) {
	t := c.t
	t.Helper()
	firstSeen = -1
	deadline := up.Add(recoveryBound)
	for s == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no leader %v after the store was back", recoveryBound)
		}
		if ls, sts := leaders(t, c.live()); len(ls) == 1 {
			if firstSeen < 0 {
				firstSeen = time.Since(up)
			}
			if sts[0].ValidUntil != nil && time.Until(*sts[0].ValidUntil) > retryPeriod {
				s, next = ls[0], *sts[0].Token
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	took = time.Since(up)
	if (s == old && next != tok) || (s != old && next != tok+1) {
		t.Fatalf("after the outage: same holder %v with token %d, previous token %d", s == old, next, tok)
	}
	steady(t, c.live(), s, next, settledFor)
	return s, next, took, firstSeen
}

// noLeaderWhileDown fails t if anyone but old (with tok, within
// demoteBound of at) leads now.
func (c *chaos) noLeaderWhileDown(old *sidecar, tok int64, at time.Time) {
	c.t.Helper()
	if ls, sts := leaders(c.t, c.live()); len(ls) > 0 && (ls[0] != old || *sts[0].Token != tok || time.Since(at) > demoteBound) {
		c.t.Fatalf("%s leads with token %d %v after the store went away", c.member(ls[0]).pod, *sts[0].Token, time.Since(at))
	}
}

// storeLock holds SQLite's write lock from another process for a lease
// duration and a second: the leader cannot renew and demotes itself,
// nobody can be elected; after the lock is released one leader again.
func (c *chaos) storeLock(old *sidecar, tok int64) (faultResult, *sidecar, int64) {
	t := c.t
	t.Helper()
	at := time.Now()
	unlock := holdWriteLock(t, c.db)
	held := true
	t.Cleanup(func() {
		if held {
			unlock()
		}
	})
	for time.Since(at) < leaseDuration+time.Second {
		c.noLeaderWhileDown(old, tok, at)
		time.Sleep(10 * time.Millisecond)
	}
	unlockAt := time.Now()
	unlock()
	held = false
	s, next, took, first := c.awaitAgain(old, tok, unlockAt)
	demoted := lastClaimBy(c.window(at, unlockAt), c.member(old).i, tok, at).Sub(at)
	if demoted > demoteBound {
		t.Fatalf("token %d still claimed %v after the write lock was taken (bound %v)", tok, demoted, demoteBound)
	}
	return faultResult{fault: "storelock", before: c.label(old, tok), after: c.label(s, next), demoted: max(demoted, 0), recovered: took,
		note: fmt.Sprintf("write lock held %v; first claim after %v", unlockAt.Sub(at).Round(time.Millisecond), first.Round(time.Millisecond))}, s, next
}

func (c *chaos) apiserver(old *sidecar, tok int64) (faultResult, *sidecar, int64) {
	t := c.t
	t.Helper()
	api := c.k.env.ControlPlane.APIServer
	stopped := make(chan error, 1)
	down := true
	t.Cleanup(func() { // the API server is shared: start it again, whatever happens
		if down {
			<-stopped
			if err := api.Start(); err != nil {
				t.Errorf("restarting kube-apiserver: %v", err)
			}
		}
	})
	at := time.Now()
	var stopTook time.Duration
	go func() {
		err := api.Stop()
		stopTook = time.Since(at)
		stopped <- err
	}()
	var stopErr error
	func() {
		deadline := time.After(30 * time.Second)
		for {
			select {
			case stopErr = <-stopped:
				stopped <- stopErr // for the cleanup
				return
			case <-deadline:
				t.Fatal("kube-apiserver still stopping after 30s")
			case <-time.After(10 * time.Millisecond):
			}
			// Nobody may lead for long with the store gone: the old leader
			// demotes itself (demoteBound) and nobody can be elected.
			c.noLeaderWhileDown(old, tok, at)
		}
	}()
	if stopErr != nil {
		t.Fatalf("stopping kube-apiserver: %v", stopErr)
	}
	startAt := time.Now()
	if err := api.Start(); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
	down = false
	up := time.Now()
	// Every candidate tries again within 1.2 retry periods of the API
	// server answering: the holder renews its own record (same token), or a
	// standby that saw the record unchanged since before the outage takes
	// it over (t+1); a standby that saw it change after the restart waits a
	// lease duration: recoveryBound from Start returning.
	s, next, took, first := c.awaitAgain(old, tok, up)
	// Until Start was called no renewal could succeed: claims of the old
	// term sent before then are the ones the leader made without a store.
	demoted := lastClaimBy(c.window(at, startAt), c.member(old).i, tok, at).Sub(at)
	if demoted > demoteBound {
		t.Fatalf("token %d still claimed %v after kube-apiserver began stopping (bound %v)", tok, demoted, demoteBound)
	}
	return faultResult{fault: "apiserver", before: c.label(old, tok), after: c.label(s, next), demoted: max(demoted, 0), recovered: took,
		note: fmt.Sprintf("stop took %v, start %v; down %v in all; first claim after %v", stopTook.Round(time.Millisecond),
			up.Sub(startAt).Round(time.Millisecond), up.Sub(at).Round(time.Millisecond), first.Round(time.Millisecond))}, s, next
}
