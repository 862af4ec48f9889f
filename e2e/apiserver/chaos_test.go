package apiserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// Bounds of the chaos run (see TestChaos).
const (
	// recoveryBound: a standby takes a record over once it has seen it
	// unchanged for a lease duration on its own clock, counted from when
	// it saw the leader's last renewal, before the fault; it notices
	// expiry at its next attempt, at most 1.2 retry periods after the
	// lease ran out; one more second covers sampling, process scheduling
	// and -race on two shared cores.
	recoveryBound = sidecartest.LeaseDuration + 3*sidecartest.RetryPeriod + time.Second
	// demoteBound: a leader cut off from its store (or its store stopped)
	// claims only until the renew deadline after the start of its last
	// successful renewal, which began before the fault; 500ms covers the
	// sampling interval and scheduling.
	demoteBound = sidecartest.RenewDeadline + 500*time.Millisecond
	// settledFor: after recovery, exactly one leader with the expected
	// token in every sweep for this long (longer than a renew deadline, so
	// a wrongly demoting leader would show).
	settledFor = sidecartest.RenewDeadline + sidecartest.RetryPeriod
	// lookback: each fault's overlap check also covers this much of the
	// previous fault's settled tail, so no overlap hides at a boundary.
	lookback = time.Second
	// runBound bounds the whole run.
	runBound = 150 * time.Second
)

// faultResult is one row of the figures.
type faultResult struct {
	fault         string
	before, after string        // holder pod and token
	demoted       time.Duration // old leader's last claim after the fault began (-1: n/a)
	recovered     time.Duration // fault start (or API server up) to one leader again
	overlap       time.Duration
	claims        int
	note          string
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
//	delete    the Lease is deleted under the live leader; the leader, still
//	          inside its claim, recreates it with t+1 at its next renewal,
//	          never answering leader:false in between; the standbys, which
//	          saw a holder, would wait a lease duration before creating it
//	stall     the leader's open connections go silently dead for more than
//	          a lease duration (bytes dropped, nothing closed) while new
//	          ones work; its timed-out renewal makes the client dial anew,
//	          and it keeps its term t, never answering leader:false
//	stallsb   the same for a standby's connections, for more than a lease
//	          and a renew deadline: it takes the silent Lease for expired,
//	          its read times out, it dials anew and reads the renewed
//	          Lease; the leader keeps its term t throughout
//
// Invariants, checked per fault on every /leader answer (sampled every 5ms
// per sidecar) and over the whole run: no older term claimed after a newer
// term's first claim arrived (zero allowance: an overlap of any length
// fails the run); a demoted leader stops claiming within demoteBound; no token claimed by two
// sidecars; tokens never decrease per sidecar; the shared guard accepted
// writes in non-decreasing token order and finally holds the last term
// (its token and holder); one leader again within recoveryBound after each
// fault (after the API server's Start returned, for the restart); every
// sidecar alive at the end except the killed one, which died of SIGKILL.
//
// The sqlite variant runs kill, pause and storelock (another process holds
// SQLite's write lock for more than a lease duration, the file-backend
// analogue of the API server outage) with the same invariants.
func TestChaos(t *testing.T) {
	// Not parallel: the faults' bounds (a stalled connection redialled
	// within the renew deadline) are measured on a machine this test has
	// to itself, as go test runs the tests that do not call t.Parallel
	// before those that do.
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED: %v", err)
		}
	}
	t.Run("lease", func(t *testing.T) {
		k := sidecartest.OwnKube(t) // its schedule stops the API server
		u, err := url.Parse(k.Config.Host)
		if err != nil {
			t.Fatal(err)
		}
		c := &chaos{t: t, k: k, ns: k.Namespace(t), name: "chaos", upstream: u.Host,
			seed: seed, stop: make(chan struct{})}
		t.Cleanup(c.halt)
		c.run([]string{"kill", "pause", "apiserver", "partition", "delete", "stall", "stallsb"})
	})
	t.Run("sqlite", func(t *testing.T) {
		c := &chaos{t: t, db: sidecartest.DBPath(t), seed: seed, stop: make(chan struct{})}
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
		seed, strings.Join(faults, " -> "), quiet, sidecartest.LeaseDuration, sidecartest.RenewDeadline, sidecartest.RetryPeriod)

	begin := time.Now()
	for range 3 {
		c.add()
	}
	leader, token := sidecartest.AwaitLeader(t, c.live(), 15*time.Second)
	phaseStart := time.Now()
	var results []faultResult
	for i, f := range faults {
		if time.Since(begin) > runBound {
			t.Fatalf("chaos run past its bound of %v before %s", runBound, f)
		}
		sidecartest.AwaitSettled(t, c.live(), leader)
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
		case "stall":
			r, leader, token = c.stall(leader, token)
		case "stallsb":
			r, leader, token = c.stallStandby(leader, token)
		case "storelock":
			r, leader, token = c.storeLock(leader, token)
		default:
			t.Fatalf("unknown fault %q", f)
		}
		end := time.Now()
		claims, longest := c.checkWindow(phaseStart.Add(-lookback), end, prev, 0)
		r.overlap, r.claims = longest, len(claims)
		results = append(results, r)
		t.Logf("%s: %s -> %s, one leader again after %v", f, r.before, r.after, r.recovered.Round(time.Millisecond))
		phaseStart = end
	}
	if c.k != nil {
		c.k.LeaseShows(t, c.ns, c.name, sidecartest.IdentityOf(t, leader), token)
	}
	// The final leader's writer has had the settled period to write.
	final := fence.TermID{Token: token, Holder: sidecartest.IdentityOf(t, leader)}
	sidecartest.WaitTrue(t, "the guard holds the final term", 2*time.Second, func() bool {
		accepted, ok := c.guard.Accepted("chaos")
		return ok && accepted == final
	})
	c.halt()
	c.final(t, results, token, time.Since(begin))
}

// final checks the whole run's invariants and prints the figures.
func (c *chaos) final(t *testing.T, results []faultResult, token int64, took time.Duration) {
	t.Helper()
	// Whole run: the same check, no overlap allowed.
	claims, _ := c.checkWindow(time.Time{}, time.Now(), 1, 0)

	// Tokens never decrease per sidecar (answers of one sidecar are in the
	// order its sampler made them).
	last := map[int]int64{}
	terms := map[int64]int{}
	for _, a := range claims {
		tok := *a.State.Token
		if tok < last[a.Who] {
			t.Fatalf("sidecar %d claimed token %d after %d", a.Who, tok, last[a.Who])
		}
		last[a.Who] = tok
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
		if strings.Contains(m.s.Logs(), "panic") {
			t.Fatalf("%s logged a panic:\n%s", m.pod, m.s.Logs())
		}
		if !m.killed.Load() {
			if !m.s.Alive() {
				t.Fatalf("%s exited: %v\n%s", m.pod, m.s.ExitErr(), m.s.Logs())
			}
			continue
		}
		killed++
		ws, ok := m.s.ProcessState().Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("%s, killed on purpose, ended with %v", m.pod, m.s.ProcessState())
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n%-10s %-12s %-12s %10s %10s %9s %7s  %s\n",
		"fault", "before", "after", "demoted", "recovered", "overlap", "claims", "note")
	for _, r := range results {
		demoted := "-"
		if r.demoted >= 0 {
			demoted = r.demoted.Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "%-10s %-12s %-12s %10s %10v %9v %7d  %s\n", r.fault, r.before, r.after, demoted,
			r.recovered.Round(time.Millisecond), r.overlap.Round(time.Millisecond), r.claims, r.note)
	}
	fmt.Fprintf(&b, "run %v; sidecars %d (killed %d); samples %d, answers %d, claims %d over %d terms %v\n",
		took.Round(time.Millisecond), len(c.members), killed, c.samples, len(c.answers), len(claims), len(terms), terms)
	fmt.Fprintf(&b, "guarded writes: accepted %d (per token %v), rejected as stale %d; final token %d",
		len(accepted), perToken, rejected, token)
	t.Log(b.String())
}

// The faults. Each takes the leader and its token, injects the fault,
// checks what must hold meanwhile, and returns its row of the figures and
// the leader and token once one leads again.

// label names a sidecar and its token in the figures.
func (c *chaos) label(s *sidecartest.Sidecar, tok int64) string {
	return fmt.Sprintf("%s:%d", c.member(s).pod, tok)
}

// expectNext waits for exactly one leader with token want among live and
// fails t unless it is not old (when old is non-nil).
func (c *chaos) expectNext(old *sidecartest.Sidecar, want int64, from time.Time) (*sidecartest.Sidecar, time.Duration) {
	c.t.Helper()
	s := sidecartest.AwaitToken(c.t, c.live(), want, recoveryBound-time.Since(from))
	took := time.Since(from)
	if old != nil && s == old {
		c.t.Fatalf("the old leader %s leads again with token %d", c.member(old).pod, want)
	}
	return s, took
}

func (c *chaos) kill(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	t := c.t
	t.Helper()
	m := c.member(old)
	m.killed.Store(true)
	at := time.Now()
	old.Signal(syscall.SIGKILL)
	old.WaitExit(5 * time.Second)
	s, took := c.expectNext(old, tok+1, at)
	if took < sidecartest.LeaseDuration-sidecartest.RenewInterval-sidecartest.RetryPeriod {
		t.Fatalf("taken over %v after the kill, before the lease could have run out", took)
	}
	sidecartest.Steady(t, c.live(), s, tok+1, settledFor)
	n := c.add()
	sidecartest.Steady(t, c.live(), s, tok+1, sidecartest.RetryPeriod)
	return faultResult{fault: "kill", before: c.label(old, tok), after: c.label(s, tok+1), demoted: -1, recovered: took,
		note: "replacement " + n.pod + " joined"}, s, tok + 1
}

func (c *chaos) pause(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	t := c.t
	t.Helper()
	m := c.member(old)
	m.paused.Store(true)
	at := time.Now()
	old.Signal(syscall.SIGSTOP)
	s, took := c.expectNext(old, tok+1, at)
	if took < sidecartest.LeaseDuration-sidecartest.RenewInterval-sidecartest.RetryPeriod {
		t.Fatalf("taken over %v after the pause, before the lease could have run out", took)
	}
	if d := sidecartest.LeaseDuration + 500*time.Millisecond - time.Since(at); d > 0 {
		time.Sleep(d)
	}
	cont := time.Now()
	old.Signal(syscall.SIGCONT)
	m.paused.Store(false)
	sidecartest.Steady(t, c.live(), s, tok+1, settledFor)
	// Requests the sampler sent while the leader was frozen were answered
	// after it woke: each must disown the term.
	woke := 0
	for _, a := range c.window(at, time.Now()) {
		if a.Who == m.i && a.At.After(cont) && a.Sent.Before(cont) {
			woke++
			if a.State.Leader {
				t.Fatalf("%s answered leader:true (token %v) on waking from a %v pause",
					m.pod, sidecartest.Deref(a.State.Token), cont.Sub(at).Round(time.Millisecond))
			}
		}
	}
	return faultResult{fault: "pause", before: c.label(old, tok), after: c.label(s, tok+1), demoted: -1, recovered: took,
		note: fmt.Sprintf("paused %v; %d answers on waking, all leader:false", cont.Sub(at).Round(time.Millisecond), woke)}, s, tok + 1
}

func (c *chaos) partition(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	t := c.t
	t.Helper()
	m := c.member(old)
	at := time.Now()
	m.px.Cut()
	s, took := c.expectNext(old, tok+1, at)
	if d := sidecartest.RenewDeadline + 500*time.Millisecond - time.Since(at); d > 0 {
		time.Sleep(d)
	}
	healed := time.Now()
	m.px.Heal()
	sidecartest.Steady(t, c.live(), s, tok+1, settledFor)
	demoted := lastClaimBy(c.window(at, time.Now()), m.i, tok, at).Sub(at)
	if demoted > demoteBound {
		t.Fatalf("%s, cut off from the API server, claimed token %d %v after the cut (bound %v)", m.pod, tok, demoted, demoteBound)
	}
	return faultResult{fault: "partition", before: c.label(old, tok), after: c.label(s, tok+1), demoted: max(demoted, 0), recovered: took,
		note: fmt.Sprintf("cut %v, %d connections held", healed.Sub(at).Round(time.Millisecond), m.px.Held.Load())}, s, tok + 1
}

// deleteLease deletes the Lease under the live leader. The leader, still
// inside its claim, recreates it with t+1 at its next renewal (a retry
// period on) and claims throughout; a standby, having seen a holder, waits
// a lease duration from the deletion before it may create the record.
func (c *chaos) deleteLease(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	t := c.t
	t.Helper()
	m := c.member(old)
	at := time.Now()
	if err := c.k.Client.CoordinationV1().Leases(c.ns).Delete(context.Background(), c.name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the Lease: %v", err)
	}
	s := sidecartest.AwaitToken(t, c.live(), tok+1, sidecartest.RetryPeriod+time.Second)
	took := time.Since(at)
	if s != old {
		t.Fatalf("%s recreated the Lease %v after the deletion; the leader, still claiming, should have", c.member(s).pod, took)
	}
	sidecartest.Steady(t, c.live(), s, tok+1, settledFor)
	answers := c.window(at, time.Now())
	demoted := lastClaimBy(answers, m.i, tok, at).Sub(at)
	gaps := 0
	for _, a := range answers {
		if a.Who == m.i && !a.State.Leader && a.Sent.Before(at.Add(took)) {
			gaps++
		}
	}
	if gaps > 0 {
		t.Fatalf("%s answered leader:false %d times between the deletion and recreating the Lease", m.pod, gaps)
	}
	return faultResult{fault: "delete", before: c.label(old, tok), after: c.label(s, tok+1), demoted: max(demoted, 0), recovered: took,
		note: fmt.Sprintf("recreated by the old leader; token %d last claimed %v after the deletion; no leader:false answer between",
			tok, demoted.Round(time.Millisecond))}, s, tok + 1
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
func (c *chaos) awaitAgain(old *sidecartest.Sidecar, tok int64, up time.Time) (s *sidecartest.Sidecar, next int64, took, firstSeen time.Duration) {
	t := c.t
	t.Helper()
	firstSeen = -1
	deadline := up.Add(recoveryBound)
	for s == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no leader %v after the store was back", recoveryBound)
		}
		if ls, sts := sidecartest.Leaders(t, c.live()); len(ls) == 1 {
			if firstSeen < 0 {
				firstSeen = time.Since(up)
			}
			if sts[0].ValidUntil != nil && time.Until(*sts[0].ValidUntil) > sidecartest.RetryPeriod {
				s, next = ls[0], *sts[0].Token
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	took = time.Since(up)
	if (s == old && next != tok) || (s != old && next != tok+1) {
		t.Fatalf("after the outage: same holder %v with token %d, previous token %d", s == old, next, tok)
	}
	sidecartest.Steady(t, c.live(), s, next, settledFor)
	return s, next, took, firstSeen
}

// noLeaderWhileDown fails t if anyone but old (with tok, within
// demoteBound of at) leads now.
func (c *chaos) noLeaderWhileDown(old *sidecartest.Sidecar, tok int64, at time.Time) {
	c.t.Helper()
	if ls, sts := sidecartest.Leaders(c.t, c.live()); len(ls) > 0 && (ls[0] != old || *sts[0].Token != tok || time.Since(at) > demoteBound) {
		c.t.Fatalf("%s leads with token %d %v after the store went away", c.member(ls[0]).pod, *sts[0].Token, time.Since(at))
	}
}

// storeLock holds SQLite's write lock from another process for a lease
// duration and a second: the leader cannot renew and demotes itself,
// nobody can be elected; after the lock is released one leader again.
func (c *chaos) storeLock(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	t := c.t
	t.Helper()
	at := time.Now()
	unlock := sidecartest.HoldWriteLock(t, c.db)
	held := true
	t.Cleanup(func() {
		if held {
			unlock()
		}
	})
	for time.Since(at) < sidecartest.LeaseDuration+time.Second {
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

func (c *chaos) apiserver(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	t := c.t
	t.Helper()
	api := c.k.Env.ControlPlane.APIServer
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

// stall makes the leader's open connections to the API server silently
// dead for longer than a lease duration (its proxy drops their bytes and
// closes nothing; new connections work), as a dropped NAT or conntrack
// entry would. Over HTTP/2 every request shares that one connection. The
// leader's renewal on it times out, the client closes its connections,
// and the retry, within the claim, renews over a new one: the leader
// keeps its term and never answers leader:false, and no standby leads.
func (c *chaos) stall(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	m := c.member(old)
	stalled, redialled := c.stallConnections(m, old, tok, sidecartest.LeaseDuration+500*time.Millisecond)
	return faultResult{fault: "stall", before: c.label(old, tok), after: c.label(old, tok), demoted: -1,
		note: fmt.Sprintf("the leader's %d connections dead for %v, %d dialled since; no leader:false answer",
			stalled, sidecartest.LeaseDuration+500*time.Millisecond, redialled)}, old, tok
}

// stallStandby makes a standby's connections silently dead for longer
// than a lease duration and a renew deadline. Its watch hears nothing, so
// it takes the leader's Lease for expired and reads it to take it over;
// the read times out, the client dials anew, and it reads the renewed
// Lease and stays a standby: the leader keeps its term throughout.
func (c *chaos) stallStandby(old *sidecartest.Sidecar, tok int64) (faultResult, *sidecartest.Sidecar, int64) {
	var m *chaosMember
	for _, s := range c.live() {
		if s != old {
			m = c.member(s)
			break
		}
	}
	d := sidecartest.LeaseDuration + sidecartest.RenewDeadline + time.Second
	stalled, redialled := c.stallConnections(m, old, tok, d)
	return faultResult{fault: "stallsb", before: c.label(old, tok), after: c.label(old, tok), demoted: -1,
		note: fmt.Sprintf("standby %s's %d connections dead for %v, %d dialled since; no leader:false answer",
			m.pod, stalled, d, redialled)}, old, tok
}

// stallConnections stalls m's connections for d, failing the run if
// anyone but leader with tok leads meanwhile, if m dialled no new
// connection before d was up (the client never gave the dead one up), or
// if leader answered leader:false from the stall until it has been steady
// for settledFor after.
func (c *chaos) stallConnections(m *chaosMember, leader *sidecartest.Sidecar, tok int64, d time.Duration) (stalled, redialled int64) {
	t := c.t
	t.Helper()
	dialled := m.px.Forwarded.Load()
	at := time.Now()
	m.px.Stall()
	for time.Since(at) < d {
		if ls, sts := sidecartest.Leaders(t, c.live()); len(ls) > 0 && (ls[0] != leader || *sts[0].Token != tok) {
			t.Fatalf("%s leads with token %d %v after %s's connections went dead",
				c.member(ls[0]).pod, *sts[0].Token, time.Since(at).Round(time.Millisecond), m.pod)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stalled, redialled = m.px.Stalled.Load(), m.px.Forwarded.Load()-dialled
	m.px.Unstall()
	if stalled == 0 || redialled == 0 {
		t.Fatalf("%s: %d connections stalled, %d dialled in %v: the client kept waiting on the dead ones", m.pod, stalled, redialled, d)
	}
	sidecartest.Steady(t, c.live(), leader, tok, settledFor)
	gaps, who := 0, c.member(leader).i
	for _, a := range c.window(at, time.Now()) {
		if a.Who == who && !a.State.Leader {
			gaps++
		}
	}
	if gaps > 0 {
		t.Fatalf("the leader answered leader:false %d times after %s's connections went dead", gaps, m.pod)
	}
	return stalled, redialled
}
