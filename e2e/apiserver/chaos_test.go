package apiserver

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

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

// chaosMember is one sidecar of the chaos run and its own proxy.
type chaosMember struct {
	i      int
	pod    string
	s      *sidecartest.Sidecar
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
	k        *sidecartest.KubeEnv
	ns, name string
	upstream string // lease: the API server's host:port
	tlsName  string
	db       string // sqlite: the election's file
	seed     uint64
	stop     chan struct{}
	wg       sync.WaitGroup

	mu       sync.Mutex
	members  []*chaosMember
	answers  []sidecartest.Answer // every /leader answer, per member in sampling order
	failed   []error              // a live, running sidecar that did not answer
	samples  int
	guard    fence.MemoryGuard
	accepted []chaosWrite // in the order the guard accepted them
	rejected int
	writeErr []error // a write refused for another reason than a stale token
}

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
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED: %v", err)
		}
	}
	t.Run("lease", func(t *testing.T) {
		k := sidecartest.Kube(t)
		u, err := url.Parse(k.Config.Host)
		if err != nil {
			t.Fatal(err)
		}
		c := &chaos{t: t, k: k, ns: k.Namespace(t), name: "chaos", upstream: u.Host, tlsName: u.Hostname(),
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
