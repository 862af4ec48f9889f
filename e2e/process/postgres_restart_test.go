package process

import (
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/pgtest"
	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// Three sidecars on a PostgreSQL server of their own, every one sampled as
// fast as it answers throughout, while the server is
//
// restarted: a fast shutdown (every session ended, every commit kept),
// back within half a second. After it exactly one replica leads: the
// leader with its token (it renewed on a new connection within its renew
// deadline) or, if that took longer, the next with a higher token;
//
// stopped past the lease: down for a lease and a renew interval. No replica can
// renew or take over while the server is down: the leader stops claiming
// within its renew deadline of the stop (no claim is asked for later than
// that and answered leader: true: it last renewed before the stop), and
// nobody claims again until the server is back. Then one replica leads
// within two leases: the leader again, its term resumed (nobody could
// write in between, and the row still names it), or another with a higher
// token once its wait for the row's expiry ran out.
//
// Throughout, no claim of an older term comes after a newer term's first
// claim, and no token is claimed by two replicas.
func TestPostgresServerRestartedOrStopped(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		down time.Duration
	}{
		{"restarted", 500 * time.Millisecond},
		{"stopped past the lease", sidecartest.LeaseDuration + sidecartest.RenewInterval},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			server, err := pgtest.Start()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := server.Stop(); err != nil {
					t.Errorf("stopping PostgreSQL: %v", err)
				}
			})
			var all []*sidecartest.Sidecar
			for range 3 {
				all = append(all, sidecartest.Spawn(t, nil, "--backend", "postgres", "--postgres-url", server.DSN))
			}
			for _, s := range all {
				s.WaitServing()
			}
			leader, token := sidecartest.AwaitSettledLeader(t, all, 10*time.Second)

			var log sidecartest.ClaimLog
			halt := log.SampleUntilHalted(all, func(s *sidecartest.Sidecar, err error) bool {
				t.Errorf("GET /leader of sidecar %d: %v", s.Pid(), err)
				return false
			})
			t.Cleanup(halt) // a failed check must not leave samplers asking dead sidecars
			log.AwaitSampled(t, token)
			if err := server.Halt(); err != nil {
				t.Fatalf("stopping PostgreSQL: %v", err)
			}
			// From here until Resume begins the server is down, and the
			// leader's last renewal was sent before it.
			stopped := time.Now()
			time.Sleep(c.down)
			downUntil := time.Now()
			if err := server.Resume(); err != nil {
				t.Fatalf("starting PostgreSQL again: %v", err)
			}
			back := time.Now()
			next, nextToken := sidecartest.AwaitLeader(t, all, 2*sidecartest.LeaseDuration)
			led := time.Since(back)
			if nextToken < token || (nextToken == token && next != leader) {
				t.Fatalf("after the server came back: token %d of another replica, the leader before had %d", nextToken, token)
			}
			log.AwaitSampled(t, nextToken)
			sidecartest.AwaitSettled(t, all, next)
			halt()

			terms := log.Check(t)
			var lastDown time.Time // the last claim asked for while the server was surely down
			for _, cl := range log.Claims() {
				if cl.Sent.After(stopped) && cl.Sent.Before(downUntil) && cl.Sent.After(lastDown) {
					lastDown = cl.Sent
				}
			}
			log.CheckOneHolderPerTerm(t)
			var claimedDown time.Duration // how long after the server had stopped the last claim while down was asked for
			if !lastDown.IsZero() {
				claimedDown = lastDown.Sub(stopped)
			}
			if c.down > sidecartest.LeaseDuration && claimedDown > sidecartest.RenewDeadline {
				t.Errorf("a replica claimed when asked %v after the server stopped, past its renew deadline (%v)", claimedDown.Round(time.Millisecond), sidecartest.RenewDeadline)
			}
			t.Logf("down %v: leader before with token %d, after with token %d (the same replica: %v), %v after the server was back; the last claim while down asked for %v after the stop; terms %v",
				c.down, token, nextToken, next == leader, led.Round(time.Millisecond), claimedDown.Round(time.Millisecond), terms)
		})
	}
}
