package process

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// Three sidecars on one PostgreSQL, each through a TCP proxy of its own,
// every one sampled as fast as it answers throughout.
//
// cut: the leader's path to the server is severed (its connections closed
// and new ones held unanswered, as a partition). A standby takes over
// once the lease has run out, with the token one higher, and no claim of
// the older term is sent after the newer term's first claim: the cut-off
// leader stopped claiming in time, though it never heard of its
// successor. Once the path is back it stays a standby, and the successor
// keeps leading.
//
// stall: the leader's open connections go silently dead (nothing is
// closed, what is sent is lost, as with a dead peer or a dropped NAT
// entry) while new ones work. No claim of an older term comes after a
// newer one's, and one replica leads after it: the leader, which gave up
// on the dead connections and renewed on new ones (one request's timeout,
// TestDeadConnectionsCostOneTimeout), or, when that took past its renew
// deadline on a loaded machine, the next with the token one higher.
func TestPostgresLeaderCutOffFromTheServer(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"cut", "stall"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			socket := filepath.Join(postgresServer.Server(t).SocketDir, ".s.PGSQL.5432")
			var all []*sidecartest.Sidecar
			proxies := map[*sidecartest.Sidecar]*sidecartest.TCPProxy{}
			for range 3 {
				px := sidecartest.NewTCPProxy(t, socket)
				url := fmt.Sprintf("postgres://postgres:%s@%s/postgres?sslmode=disable", neverLogged, px.Addr())
				s := sidecartest.Spawn(t, []string{"LEADER_SIDECAR_POSTGRES_URL=" + url}, "--backend", "postgres", "--postgres-table", "cut_off_"+fault)
				all = append(all, s)
				proxies[s] = px
			}
			for _, s := range all {
				s.WaitServing()
			}
			leader, token := sidecartest.AwaitSettledLeader(t, all, 10*time.Second)

			var log sidecartest.ClaimLog
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for _, s := range all {
				log.Sample(&wg, stop, s, func(err error) bool {
					t.Errorf("GET /leader of sidecar %d: %v", s.Pid(), err)
					return false
				})
			}
			log.AwaitSampled(t, token)
			px := proxies[leader]
			began := time.Now()
			want := 2
			if fault == "cut" {
				px.Cut()
				next, nextToken := sidecartest.AwaitLeader(t, sidecartest.Without(all, leader), 3*sidecartest.LeaseDuration)
				took := time.Since(began)
				if nextToken != token+1 {
					t.Fatalf("after the cut: token %d, want %d", nextToken, token+1)
				}
				if least := sidecartest.LeaseDuration - sidecartest.RenewInterval; took < least {
					t.Fatalf("a standby took over %v after the cut, before the lease could have run out (%v)", took, least)
				}
				log.AwaitSampled(t, nextToken)
				if st, err := leader.Leader(); err != nil || st.Leader {
					t.Fatalf("the cut-off leader, once its successor leads: %+v, %v; want it not leading", st, err)
				}
				px.Heal()
				sidecartest.AwaitSettled(t, all, next)
				sidecartest.Steady(t, all, next, nextToken, sidecartest.LeaseDuration)
				t.Logf("cut: the next leader led %v after it (lease %v); %d connections held", took.Round(time.Millisecond), sidecartest.LeaseDuration, px.Held.Load())
			} else {
				dialled := px.Forwarded.Load()
				px.Stall()
				time.Sleep(2 * sidecartest.LeaseDuration)
				next, nextToken := sidecartest.AwaitLeader(t, all, 3*sidecartest.LeaseDuration)
				kept := next == leader && nextToken == token
				if !kept && nextToken != token+1 {
					t.Fatalf("after the stall: token %d, want %d (kept) or %d", nextToken, token, token+1)
				}
				if kept {
					want = 1
				}
				t.Logf("stall: %d connections stalled, %d dialled since; the leader kept its term: %v (token %d, then %d)",
					px.Stalled.Load(), px.Forwarded.Load()-dialled, kept, token, nextToken)
			}
			close(stop)
			wg.Wait()
			terms := log.Check(t)
			if len(terms) != want {
				t.Fatalf("answers covered terms %v, want %d", terms, want)
			}
			for _, s := range all {
				if strings.Contains(s.Logs(), neverLogged) {
					t.Errorf("sidecar %d printed the password:\n%s", s.Pid(), s.Logs())
				}
			}
		})
	}
}
