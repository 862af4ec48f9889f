package process

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestKilledWhileReleasingNeverOverlaps sends the leader SIGTERM and then
// SIGKILL, round after round, at delays from none (before its release
// starts) through the few milliseconds in which it stops claiming,
// releases and exits, to 50ms (after it exited), with every sidecar
// polled as fast as it answers throughout. Whether the release reached
// the file or not, the next term has the next token and no two terms ever
// claim at one instant; a release that reached the file lets a standby
// take over at once, one that did not is waited out (both must happen).
// The file stays sound.
func TestKilledWhileReleasingNeverOverlaps(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	var (
		log    sidecartest.ClaimLog
		wg     sync.WaitGroup
		killed sync.Map // *Sidecar -> true, once it is sent SIGTERM
	)
	stop := make(chan struct{})
	sample := func(s *sidecartest.Sidecar) {
		log.Sample(&wg, stop, s, func(err error) bool {
			if _, dying := killed.Load(s); !dying {
				t.Errorf("GET /leader of a sidecar nobody stopped: %v", err)
			}
			return false
		})
	}
	live := sidecartest.StartMany(t, db, 3)
	for _, s := range live {
		sample(s)
	}
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	delays := []time.Duration{0, ms(0.5), ms(1), ms(1.25), ms(1.5), ms(1.75), ms(2), ms(2.5), ms(3), ms(50)}
	var handedOver, waitedOut atomic.Int32
	leader, token := sidecartest.AwaitLeader(t, live, 10*time.Second)
	for _, d := range delays {
		// A term shorter than one sample would be missing from the terms
		// counted at the end.
		log.AwaitSampled(t, token)
		killed.Store(leader, true)
		at := time.Now()
		leader.Signal(syscall.SIGTERM)
		time.Sleep(d)
		_ = leader.Cmd().Process.Signal(syscall.SIGKILL) // it may have exited, its release done
		leader.WaitExit(5 * time.Second)
		live = sidecartest.Without(live, leader)
		next, tok := sidecartest.AwaitLeader(t, live, sidecartest.LeaseDuration+3*sidecartest.RetryPeriod+time.Second)
		took := time.Since(at)
		if tok != token+1 {
			t.Fatalf("killed %v after SIGTERM: the next leader has token %d, want %d", d, tok, token+1)
		}
		if took < sidecartest.LeaseDuration/2 {
			handedOver.Add(1)
		} else {
			waitedOut.Add(1)
		}
		t.Logf("killed %v after SIGTERM: token %d after %v", d, tok, took.Round(time.Millisecond))
		s := sidecartest.Start(t, db)
		sample(s)
		live = append(live, s)
		leader, token = next, tok
	}
	log.AwaitSampled(t, token)
	time.Sleep(200 * time.Millisecond) // and a late claim of the term before
	close(stop)
	wg.Wait()

	terms := log.Check(t)
	if len(terms) != len(delays)+1 {
		t.Fatalf("answers covered terms %v, want %d", terms, len(delays)+1)
	}
	if handedOver.Load() == 0 || waitedOut.Load() == 0 {
		t.Fatalf("%d hand-offs at once, %d waited out: the kills did not land both before and after a release",
			handedOver.Load(), waitedOut.Load())
	}
	checkIntegrity(t, db)
}

// checkIntegrity fails t unless SQLite finds the file db sound.
func checkIntegrity(t *testing.T, db string) {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	var res string
	if err := conn.QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check of %s: %q, %v", db, res, err)
	}
}
