package apiserver

import (
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
)

// handoffBound is how soon the new leader must lead after the hand-off
// was asked for: the "well under a second", as a generous limit.
const handoffBound = time.Second

// Sidecars on one Lease hand leadership to each other, by Pod name and to
// anyone, while a client-go candidate contends for the same Lease: each
// hand-off gives the next token to a sidecar within a second, the client-go
// candidate never leads (it never sees a record it may take: each one
// names a live holder and the offer and the transfer change it), and no
// two claims overlap, sampled every 10ms on every sidecar and every 2ms on
// the client-go candidate. The last leader's renewal leaves no marker.
func TestLeaseHandoffsKeepAClientGoCandidateOut(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "handoff"
	kc := k.Kubeconfig(t, "")
	var all []*sidecartest.Sidecar
	var set sidecartest.Members
	for i := range 3 {
		s := sidecartest.LeaseSidecar(t, kc, ns, name, fmt.Sprintf("app-%d", i))
		all = append(all, s)
		set.Add(fmt.Sprintf("app-%d", i), s, 0)
	}
	leader, token := sidecartest.AwaitSettledLeader(t, all, 15*time.Second)
	cg := startClientGo(t, k, ns, name, "client-go")

	var log sidecartest.ClaimLog
	halt := log.SweepUntilHalted(sidecartest.SweepEvery, set.All)
	defer halt()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	sampleClientGo(&log, &wg, stop, cg)
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(sidecartest.LeaseDuration) // client-go has seen the Lease change a few times

	var tookAll []time.Duration
	for round := range 6 {
		next := sidecartest.Without(all, leader)[round%2]
		to := fmt.Sprintf("app-%d", indexOf(all, next))
		if round%3 == 2 {
			to = "" // anyone
		}
		began := time.Now()
		code, st, err := leader.Handoff(to)
		if err != nil || code != http.StatusOK || st.Leader || st.Holder == "" {
			t.Fatalf("round %d: hand-off to %q: %d %+v %v", round, to, code, st, err)
		}
		if to == "" {
			next = byIdentity(t, all, st.Holder)
		} else if st.Holder != sidecartest.IdentityOf(t, next) {
			t.Fatalf("round %d: handed off to %s, want %s", round, st.Holder, sidecartest.IdentityOf(t, next))
		}
		token++
		tookAll = append(tookAll, sidecartest.AwaitLeads(t, next, token, began, handoffBound))
		leader = next
		time.Sleep(500 * time.Millisecond)
	}
	sidecartest.Steady(t, all, leader, token, 2*sidecartest.LeaseDuration) // client-go stays out afterwards too
	halt()

	if cg.leading.Load() {
		t.Fatal("the client-go candidate leads after the hand-offs")
	}
	if errs := log.Failed("app-0", "app-1", "app-2"); len(errs) > 0 {
		t.Fatalf("sidecars did not answer: %v", errs)
	}
	terms := log.Check(t)
	for _, c := range log.Claims() {
		if c.Who == "client-go" {
			t.Fatalf("the client-go candidate claimed leadership (term %v)", c.Term)
		}
	}
	if len(terms) != 7 {
		t.Fatalf("the sweeps saw terms %v, want the first and one per hand-off", terms)
	}
	l := k.Lease(t, ns, name)
	if _, ok := l.Annotations[lease.HandoffAnnotation]; ok || int64(*l.Spec.LeaseTransitions) != token {
		t.Fatalf("the Lease after the hand-offs: annotations %v, leaseTransitions %d; want no marker and token %d",
			l.Annotations, *l.Spec.LeaseTransitions, token)
	}
	t.Logf("6 hand-offs on a Lease with a client-go candidate: each new leader led %v after the request", tookAll)
}

func indexOf(all []*sidecartest.Sidecar, s *sidecartest.Sidecar) int {
	for i, x := range all {
		if x == s {
			return i
		}
	}
	return -1
}

func byIdentity(t *testing.T, all []*sidecartest.Sidecar, identity string) *sidecartest.Sidecar {
	t.Helper()
	for _, s := range all {
		if sidecartest.IdentityOf(t, s) == identity {
			return s
		}
	}
	t.Fatalf("no sidecar has the identity %q", identity)
	return nil
}

// On a Lease shared with a client-go candidate, the target stops (SIGSTOP,
// by its own test hook) right after its accept is written: the leader
// transfers and stops leading, the Lease names the stopped target and is
// never renewed, and a sidecar or the client-go candidate takes it over
// with the token after that once a lease duration has passed, as after a
// leader's crash; the target never claims, even once resumed.
func TestLeaseHandoffTargetStoppedRightAfterAccepting(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "handoff-stopped"
	kc := k.Kubeconfig(t, "")
	leader := sidecartest.LeaseSidecar(t, kc, ns, name, "app-0")
	_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{leader}, 15*time.Second)
	target := sidecartest.SpawnBinary(t, sidecartest.HookedBinary(t),
		[]string{"POD_NAME=app-1", "POD_NAMESPACE=" + ns, "SIDECAR_E2E_STOP_AFTER_ACCEPT=1"},
		"--backend", "lease", "--kubeconfig", kc, "--namespace", ns, "--lease-name", name)
	target.WaitServing()
	all := []*sidecartest.Sidecar{leader, target}
	sidecartest.AwaitSettled(t, all, leader)
	targetIdentity := sidecartest.IdentityOf(t, target) // it cannot answer once stopped
	cg := startClientGo(t, k, ns, name, "client-go")

	var log sidecartest.ClaimLog
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, s := range all {
		log.Sample(&wg, stop, s, func(error) bool { return true }) // the stopped one times out: keep sampling
	}
	sampleClientGo(&log, &wg, stop, cg)
	var once sync.Once
	haltSamplers := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer haltSamplers()
	time.Sleep(sidecartest.LeaseDuration)

	code, st, err := leader.Handoff("app-1")
	transferred := time.Now()
	if err != nil || code != http.StatusOK || st.Leader || st.Holder != targetIdentity {
		t.Fatalf("hand-off to app-1: %d %+v %v; want 200 naming %s", code, st, err, targetIdentity)
	}
	k.LeaseShows(t, ns, name, targetIdentity, token+1)

	// The next leader: the old one (a sidecar standby now) or client-go.
	var took time.Duration
	for {
		took = time.Since(transferred)
		if st, err := leader.Leader(); err == nil && st.Leader {
			if *st.Token != token+2 {
				t.Fatalf("the old leader took over with token %d, want %d", *st.Token, token+2)
			}
			break
		}
		if cg.leading.Load() {
			if cg.token.Load() != token+2 {
				t.Fatalf("client-go took over with token %d, want %d", cg.token.Load(), token+2)
			}
			break
		}
		if took > sidecartest.LeaseDuration+2*time.Second {
			t.Fatalf("nobody took over %v after the transfer to the stopped target", took)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if took < sidecartest.LeaseDuration-250*time.Millisecond {
		t.Fatalf("taken over %v after the transfer, before the %v lease could run out", took, sidecartest.LeaseDuration)
	}
	target.Signal(syscall.SIGCONT)
	time.Sleep(sidecartest.LeaseDuration)
	haltSamplers()

	terms := log.Check(t)
	if terms[sidecartest.Term{Token: token + 1}] != 0 || terms[sidecartest.Term{Token: token + 2}] == 0 {
		t.Fatalf("claims sampled per term %v: want %d claimed, and never the stopped target's %d", terms, token+2, token+1)
	}
	t.Logf("target stopped after accepting, on a Lease with a client-go candidate: taken over %v after the transfer (lease %v); claims per term %v",
		took.Round(time.Millisecond), sidecartest.LeaseDuration, terms)
}
