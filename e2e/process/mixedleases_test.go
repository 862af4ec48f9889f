package process

import (
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// A rolling update that shortens the lease runs old and new replicas side
// by side, each with its own lease. A standby waits out a record for the
// lease its holder declares, but trusts it only up to its
// --max-record-lease-duration. Here the old replica A (lease 9s, renew
// deadline 6s) leads and is frozen (SIGSTOP, outside a write to the
// SQLite file, which would keep every writer out), and the new replica B
// (lease 3s) waits its record out; once B leads, A is woken with a
// request queued while it was frozen, so its first answer is the claim it
// makes on waking. When B's bound covers A's lease (9s), A's claim, as A
// stated it before the freeze, has ended by the time B leads, and A
// answers not leader. The baseline, a bound below A's lease (3s, as ten
// times a lease ten times shorter would be below a longer old one), has
// B take the record over while A's stated claim still runs: A, woken
// then, leads by its own clock until it hears of B (it may hear first,
// through its change signal, so its answer on waking is only logged). This is why the
// bound must cover every candidate's lease, and why the charts refuse an
// upgrade that breaks it (TestUpgradeKeepsTrustAcrossTheRollout).
func TestMixedLeasesSideBySide(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, bound  string
		stillClaimed bool
	}{
		{"bound covers the old lease", "9s", false},
		{"bound below the old lease", "3s", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := sidecartest.DBPath(t)
			old := sidecartest.Start(t, db, "--identity", "old", "--lease-duration", "9s", "--renew-deadline", "6s", "--renew-interval", "500ms",
				"--max-record-lease-duration", "9s")
			_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{old}, 10*time.Second)
			next := sidecartest.Start(t, db, "--identity", "new", "--max-record-lease-duration", c.bound)
			time.Sleep(sidecartest.RetryPeriod * 2) // the new replica has read the old one's record
			// The old leader's claim as it states it: it leads until then
			// unless it hears otherwise. Frozen, it cannot hear.
			st, err := old.Leader()
			if err != nil || !st.Leader || st.ValidUntil == nil {
				t.Fatalf("the old replica before the freeze: %+v, %v; want it leading", st, err)
			}
			claimedUntil := *st.ValidUntil
			// Frozen inside a write transaction, the old replica would
			// keep the new one out of the file: a store outage, not the
			// pause this test means. Caught in one, it is continued and
			// frozen again a moment later (a renewal meanwhile only
			// moves its claim later than the one stated above).
			sidecartest.StopOutsideWrites(t, func() { old.Signal(syscall.SIGSTOP) }, func() { old.Signal(syscall.SIGCONT) },
				[]int{old.Pid()}, db)
			frozen := time.Now()
			_, nextToken := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{next}, 15*time.Second)
			led := time.Now() // the new term began before this
			took := led.Sub(frozen)
			if nextToken != token+1 {
				t.Fatalf("the new replica leads with token %d, want %d", nextToken, token+1)
			}

			conn, err := net.DialTimeout("tcp", old.Addr(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write([]byte("GET /leader HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			old.Signal(syscall.SIGCONT)
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			var reply strings.Builder
			buf := make([]byte, 4096)
			for {
				n, err := conn.Read(buf)
				reply.Write(buf[:n])
				if err != nil {
					break
				}
			}
			body := reply.String()
			claimed := strings.Contains(body, `"leader":true`)
			overlap := claimedUntil.Sub(led)
			t.Logf("bound %s: the new replica led %v after the old one froze, whose claim ran %v longer; the old one's first answer on waking: %s",
				c.bound, took.Round(time.Millisecond), overlap.Round(time.Millisecond), body[strings.LastIndex(body, "\r\n")+2:])
			switch {
			case !strings.Contains(body, `"leader":`):
				t.Fatalf("no answer from the old replica on waking:\n%s", body)
			case !c.stillClaimed && (claimed || overlap > 0):
				t.Errorf("the old replica's claim (token %d) ran %v past the new one's start (token %d); on waking it answered leader %v",
					token, overlap, nextToken, claimed)
			case c.stillClaimed && overlap <= 0:
				t.Errorf("the old replica's claim ended %v before the new one led: the baseline shows nothing", -overlap)
			}
		})
	}
}
