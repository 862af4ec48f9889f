package process

import (
	"strings"
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
	sidecartest.WaitTrue(t, "every sidecar polls, its notifications not arriving", 15*time.Second, func() bool {
		for _, s := range all {
			if !strings.Contains(s.Logs(), "notifications do not arrive") {
				return false
			}
		}
		return true
	})
	// The offer, its acceptance and the transfer are each learnt by a poll
	// (every retry period), so a hand-off takes a few; a take-over after
	// expiry could not come before the lease less a renew interval.
	handOff, failOver, terms := handOffThenFailOver(t, all, sidecartest.LeaseDuration-sidecartest.RenewInterval)
	t.Logf("through PgBouncer (transaction mode): hand-off after SIGTERM %v, fail-over after SIGKILL %v (lease %v); answers per term %v",
		handOff.Round(time.Millisecond), failOver.Round(time.Millisecond), sidecartest.LeaseDuration, terms)
}
