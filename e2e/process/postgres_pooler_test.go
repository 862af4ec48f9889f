package process

import (
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/pgtest"
	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// Three sidecars on PostgreSQL through a real PgBouncer in transaction
// mode (pool_mode=transaction, a pool of four server sessions), where a
// session that ran LISTEN is handed to other clients: with the default
// --postgres-signal auto each sidecar finds that its test notification
// does not arrive and polls instead, and says so; the election works
// through the pooler's shared sessions (every write a compare-and-swap in
// a transaction of its own); a SIGTERM hands off in a few polls (sooner
// than any take-over after expiry) with the token one higher, and a SIGKILL
// fails over once the lease has run out. Every replica sampled: no claim
// of an older term after a newer term's first claim.
func TestPostgresThroughATransactionPooler(t *testing.T) {
	t.Parallel()
	server := postgresServer.Server(t)
	pooler, err := pgtest.StartPooler(server, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pooler.Stop(); err != nil {
			t.Errorf("stopping PgBouncer: %v", err)
		}
	})
	all := make([]*sidecartest.Sidecar, 3)
	for i := range all {
		all[i] = sidecartest.Spawn(t, nil, "--backend", "postgres", "--postgres-url", pooler.DSN, "--postgres-table", "through_a_pooler")
	}
	for _, s := range all {
		s.WaitServing()
	}
	first, token := sidecartest.AwaitLeader(t, all, 15*time.Second)
	sidecartest.AwaitSettled(t, all, first)
	sidecartest.WaitTrue(t, "every sidecar polls, its notifications not arriving", 10*time.Second, func() bool {
		for _, s := range all {
			if !strings.Contains(s.Logs(), "notifications do not arrive") {
				return false
			}
		}
		return true
	})

	var log sidecartest.ClaimLog
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var mu sync.Mutex
	gone := map[*sidecartest.Sidecar]bool{}
	for _, s := range all {
		log.Sample(&wg, stop, s, func(err error) bool {
			mu.Lock()
			defer mu.Unlock()
			if !gone[s] {
				t.Errorf("GET /leader of a live sidecar: %v", err)
			}
			return false
		})
	}
	log.AwaitSampled(t, token)

	mu.Lock()
	gone[first] = true
	mu.Unlock()
	signalled := time.Now()
	first.Signal(syscall.SIGTERM)
	second, secondToken := sidecartest.AwaitLeader(t, sidecartest.Without(all, first), sidecartest.LeaseDuration)
	handOff := time.Since(signalled)
	if code := first.WaitExit(10 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit status %d, want 0", code)
	}
	if secondToken != token+1 {
		t.Fatalf("after the hand-off: token %d, want %d", secondToken, token+1)
	}
	// The offer, its acceptance and the transfer are each learnt by a poll
	// (every retry period), so a hand-off takes a few; a take-over after
	// expiry could not come before the lease less a renew interval.
	if bound := sidecartest.LeaseDuration - sidecartest.RenewInterval; handOff >= bound {
		t.Fatalf("hand-off took %v, want under %v, the earliest a standby could take over after expiry", handOff, bound)
	}
	log.AwaitSampled(t, secondToken)

	mu.Lock()
	gone[second] = true
	mu.Unlock()
	killed := time.Now()
	second.Signal(syscall.SIGKILL)
	second.WaitExit(10 * time.Second)
	rest := sidecartest.Without(sidecartest.Without(all, first), second)
	_, thirdToken := sidecartest.AwaitLeader(t, rest, 3*sidecartest.LeaseDuration)
	failOver := time.Since(killed)
	if thirdToken != secondToken+1 {
		t.Fatalf("after the kill: token %d, want %d", thirdToken, secondToken+1)
	}
	if least := sidecartest.LeaseDuration - sidecartest.RenewInterval; failOver < least {
		t.Fatalf("a standby took over %v after the kill, before the lease could have run out (%v)", failOver, least)
	}
	log.AwaitSampled(t, thirdToken)
	close(stop)
	wg.Wait()
	terms := log.Check(t)
	if len(terms) != 3 {
		t.Fatalf("answers covered terms %v, want the three", terms)
	}
	t.Logf("through PgBouncer (transaction mode): hand-off after SIGTERM %v, fail-over after SIGKILL %v (lease %v); answers per term %v",
		handOff.Round(time.Millisecond), failOver.Round(time.Millisecond), sidecartest.LeaseDuration, terms)
}
