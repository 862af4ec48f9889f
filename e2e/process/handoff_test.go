package process

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// handoffBound is how soon the named standby must lead after the request
// was sent: the "well under a second", as a generous limit.
const handoffBound = time.Second

// pods starts sidecars named web-0 ... on db (their --identity, as
// POD_NAME would be in a Pod) and waits until one leads and every one has
// seen it.
func pods(t *testing.T, db string, n int) ([]*sidecartest.Sidecar, *sidecartest.Sidecar, int64) {
	t.Helper()
	all := make([]*sidecartest.Sidecar, n)
	for i := range all {
		all[i] = sidecartest.Launch(t, db, "--identity", fmt.Sprintf("web-%d", i))
	}
	for _, s := range all {
		s.WaitServing()
	}
	leader, token := sidecartest.AwaitSettledLeader(t, all, 10*time.Second)
	return all, leader, token
}

// podOf is the Pod name a sidecar's identity starts with.
func podOf(t *testing.T, s *sidecartest.Sidecar) string {
	return election.IdentityPrefix(sidecartest.IdentityOf(t, s))
}

// sweep asks every sidecar GET /leader every 10ms until halted.
func sweep(all []*sidecartest.Sidecar) (*sidecartest.ClaimLog, func()) {
	var set sidecartest.Members
	for _, s := range all {
		set.Add(fmt.Sprint(s.Pid()), s, 0)
	}
	log := &sidecartest.ClaimLog{}
	halt := log.SweepUntilHalted(sidecartest.SweepEvery, set.All)
	time.Sleep(200 * time.Millisecond) // the sweeps see the first term
	return log, halt
}

// checkSweeps fails t on two claims at one instant, or a live sidecar that
// did not answer, and returns the terms the sweeps saw.
func checkSweeps(t *testing.T, log *sidecartest.ClaimLog, all []*sidecartest.Sidecar) map[sidecartest.Term]int {
	t.Helper()
	var names []string
	for _, s := range all {
		names = append(names, fmt.Sprint(s.Pid()))
	}
	if errs := log.Failed(names...); len(errs) > 0 {
		t.Fatalf("live sidecars did not answer: %v", errs)
	}
	return log.Check(t)
}

// The leader hands off to a standby named by its Pod name: the standby
// leads with the next token well under a second after the request, the
// old leader answers not leader and names it, and the sweeps, every 10ms
// on every replica, never see two claims at once.
func TestHandoffToANamedStandby(t *testing.T) {
	t.Parallel()
	all, leader, token := pods(t, sidecartest.DBPath(t), 3)
	target := sidecartest.Without(all, leader)[1]
	log, halt := sweep(all)
	defer halt()

	began := time.Now()
	code, st, err := leader.Handoff(podOf(t, target))
	answered := time.Since(began)
	if err != nil || code != http.StatusOK || st.Leader || st.Holder != sidecartest.IdentityOf(t, target) || st.Error != "" {
		t.Fatalf("POST /leader/handoff: %d %+v %v; want 200, not leader, the target named", code, st, err)
	}
	took := sidecartest.AwaitLeads(t, target, token+1, began, handoffBound)
	sidecartest.Steady(t, all, target, token+1, 500*time.Millisecond)
	halt()

	terms := checkSweeps(t, log, all)
	if terms[sidecartest.Term{Token: token}] == 0 || terms[sidecartest.Term{Token: token + 1}] == 0 || len(terms) != 2 {
		t.Fatalf("the sweeps saw terms %v, want %d and %d only", terms, token, token+1)
	}
	t.Logf("hand-off to a named standby: answered in %v, the standby led with token %d %v after the request (%d sweeps)",
		answered.Round(time.Millisecond), token+1, took.Round(time.Millisecond), log.Sweeps())
}

// sidecar handoff without --to, as run by kubectl exec in the leader's
// container: one of the standbys leads with the next token within a
// second, without two claims at once.
func TestHandoffToAnyStandbyWithTheCommand(t *testing.T) {
	t.Parallel()
	all, leader, token := pods(t, sidecartest.DBPath(t), 3)
	standbys := sidecartest.Without(all, leader)
	log, halt := sweep(all)
	defer halt()

	began := time.Now()
	cmd := exec.Command(sidecartest.Binary(t), "handoff", "--address", leader.Addr())
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "handed off: web-") {
		t.Fatalf("sidecar handoff: %v, output %q", err, out)
	}
	next, nextToken := sidecartest.AwaitLeader(t, standbys, handoffBound)
	took := time.Since(began)
	if nextToken != token+1 || !strings.Contains(string(out), sidecartest.IdentityOf(t, next)) {
		t.Fatalf("after the hand-off %s leads with token %d, want token %d and the holder the command named (%q)",
			sidecartest.IdentityOf(t, next), nextToken, token+1, out)
	}
	sidecartest.Steady(t, all, next, nextToken, 500*time.Millisecond)
	halt()
	if terms := checkSweeps(t, log, all); len(terms) != 2 {
		t.Fatalf("the sweeps saw terms %v, want %d and %d", terms, token, token+1)
	}
	t.Logf("sidecar handoff to any standby: %q, the standby led %v after the command started", strings.TrimSpace(string(out)), took.Round(time.Millisecond))
}

// A hand-off to a target that is not a live candidate (never existed, or
// killed) is refused with 422 and a message that says so, and changes
// nothing: the leader keeps leading with its token, and nobody else
// claims.
func TestHandoffToADeadOrUnknownTargetChangesNothing(t *testing.T) {
	t.Parallel()
	all, leader, token := pods(t, sidecartest.DBPath(t), 3)
	dead := sidecartest.Without(all, leader)[0]
	deadPod, deadIdentity := podOf(t, dead), sidecartest.IdentityOf(t, dead)
	dead.Signal(syscall.SIGKILL)
	dead.WaitExit(5 * time.Second)
	live := sidecartest.Without(all, dead)
	log, halt := sweep(live)
	defer halt()

	for _, to := range []string{"ghost", deadPod, deadIdentity} {
		began := time.Now()
		code, st, err := leader.Handoff(to)
		if err != nil || code != http.StatusUnprocessableEntity || !st.Leader || *st.Token != token ||
			!strings.Contains(st.Error, fmt.Sprintf("candidate %q did not answer", to)) ||
			!strings.Contains(st.Error, "not a live candidate of this election") {
			t.Fatalf("hand-off to %q: %d %+v %v; want 422 naming it as no live candidate, still leading with token %d", to, code, st, err, token)
		}
		t.Logf("hand-off to %q refused after %v: %s", to, time.Since(began).Round(time.Millisecond), st.Error)
	}
	cmd := exec.Command(sidecartest.Binary(t), "handoff", "--address", leader.Addr(), "--to", deadPod)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "422 Unprocessable Entity") ||
		!strings.Contains(string(out), "not a live candidate") {
		t.Fatalf("sidecar handoff --to %s: exit %d (%v), output %q; want 1 with the reason", deadPod, code, err, out)
	}
	sidecartest.Steady(t, live, leader, token, 500*time.Millisecond)
	halt()
	if terms := checkSweeps(t, log, live); len(terms) != 1 || terms[sidecartest.Term{Token: token}] == 0 {
		t.Fatalf("the sweeps saw terms %v, want only %d", terms, token)
	}
}

// processState is the state letter of a process (R, S, T for stopped...).
func processState(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	return rest[:1]
}

// The target stops (SIGSTOP, by its own test hook) right after its accept
// is written: the leader transfers to it and stops leading, the stopped
// target never renews, and a standby takes over with the token after one
// lease duration, as after a leader's crash. When the target resumes it
// never claims. No two claims at once throughout.
func TestHandoffTargetStoppedRightAfterAccepting(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	leader := sidecartest.Start(t, db, "--identity", "web-0")
	_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{leader}, 10*time.Second)
	target := sidecartest.SpawnBinary(t, sidecartest.HookedBinary(t), []string{"SIDECAR_E2E_STOP_AFTER_ACCEPT=1"},
		"--sqlite-path", db, "--identity", "web-1")
	other := sidecartest.Start(t, db, "--identity", "web-2")
	target.WaitServing()
	all := []*sidecartest.Sidecar{leader, target, other}
	sidecartest.AwaitSettled(t, all, leader)
	targetIdentity := sidecartest.IdentityOf(t, target) // it cannot answer once stopped
	log, halt := sweep(all)
	defer halt()

	code, st, err := leader.Handoff("web-1")
	answered := time.Now()
	if err != nil || code != http.StatusOK || st.Leader || st.Holder != targetIdentity {
		t.Fatalf("POST /leader/handoff: %d %+v %v; want 200 naming the target", code, st, err)
	}
	if state := processState(t, target.Pid()); state != "T" {
		t.Fatalf("the target is in state %q after its accept, want T (stopped by its hook)", state)
	}
	survivors := []*sidecartest.Sidecar{leader, other}
	next, nextToken := sidecartest.AwaitLeader(t, survivors, sidecartest.LeaseDuration+time.Second)
	took := time.Since(answered)
	if nextToken != token+2 {
		t.Fatalf("after the stopped target %d leads with token %d, want %d", next.Pid(), nextToken, token+2)
	}
	if took < sidecartest.LeaseDuration-250*time.Millisecond {
		t.Fatalf("a standby took over %v after the transfer, before the %v lease could run out", took, sidecartest.LeaseDuration)
	}

	target.Signal(syscall.SIGCONT)
	sidecartest.Steady(t, all, next, nextToken, time.Second)
	halt()
	terms := log.Check(t)
	if terms[sidecartest.Term{Token: token + 1}] != 0 || terms[sidecartest.Term{Token: token}] == 0 || terms[sidecartest.Term{Token: token + 2}] == 0 {
		t.Fatalf("the sweeps saw terms %v: want %d and %d, and never the stopped target's %d", terms, token, token+2, token+1)
	}
	t.Logf("target stopped after accepting: the next leader took over %v after the transfer (lease %v)",
		took.Round(time.Millisecond), sidecartest.LeaseDuration)
}
