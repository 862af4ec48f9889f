package process

import (
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// Three sidecars on one PostgreSQL, every one sampled as fast as it
// answers, while the leader's sidecar is frozen with SIGSTOP (a paused
// process, a stalled VM) until a standby has taken over, with the token
// one higher once the lease has run out; when the frozen one resumes, its
// first answers already say it does not lead, though it has not yet
// heard of its successor: no claim
// of the older term is sent after the newer term's first claim, and no
// token is claimed by two replicas.
func TestPostgresLeaderPausedPastTheLease(t *testing.T) {
	t.Parallel()
	all := startOnPostgres(t, "paused_leader", 3)
	leader, token := sidecartest.AwaitSettledLeader(t, all, 10*time.Second)

	var log sidecartest.ClaimLog
	// The frozen one answers late or not at all: keep asking.
	halt := log.SampleUntilHalted(all, func(*sidecartest.Sidecar, error) bool { return true })
	t.Cleanup(halt) // a failed check must not leave samplers asking dead sidecars
	log.AwaitSampled(t, token)
	leader.Signal(syscall.SIGSTOP)
	frozen := time.Now()
	next := sidecartest.AwaitToken(t, sidecartest.Without(all, leader), token+1, 3*sidecartest.LeaseDuration)
	took := time.Since(frozen)
	log.AwaitSampled(t, token+1)
	leader.Signal(syscall.SIGCONT)
	resumed := time.Since(frozen)
	sidecartest.AwaitSettled(t, all, next)
	halt()

	terms := log.Check(t)
	log.CheckOneHolderPerTerm(t)
	if len(terms) != 2 {
		t.Fatalf("answers covered terms %v, want the two", terms)
	}
	if least := sidecartest.LeaseDuration - sidecartest.RenewInterval; took < least {
		t.Fatalf("a standby took over %v after the freeze, before the lease could have run out (%v)", took, least)
	}
	t.Logf("frozen for %v: the next leader led %v after the freeze (lease %v); answers per term %v",
		resumed.Round(time.Millisecond), took.Round(time.Millisecond), sidecartest.LeaseDuration, terms)
}
