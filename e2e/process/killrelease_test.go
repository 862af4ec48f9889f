package process

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestKilledWhileReleasingNeverOverlaps sends the leader SIGTERM and then
// SIGKILL, round after round: first while it is stopped (SIGSTOP before
// both, so its release never starts), then at delays from none through
// the few milliseconds in which it stops claiming, releases and exits, to
// 50ms, and last once it has exited by itself (its release done), with
// every sidecar polled as fast as it answers throughout. Whether the
// release reached the file or not, the next term has the next token and
// no two terms ever claim at one instant; a release that reached the file
// lets a standby take over at once, one that did not is waited out (the
// first and the last round make sure both happen; where the delays in
// between fall depends on how fast the machine is). The file stays sound.
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
	const (
		stopped = time.Duration(-1) // SIGSTOP first: SIGKILL ends it before its release starts
		exited  = time.Duration(-2) // SIGKILL once it has exited by itself
	)
	delays := []time.Duration{stopped, 0, ms(0.5), ms(1), ms(1.25), ms(1.5), ms(1.75), ms(2), ms(2.5), ms(3), ms(50), exited}
	var handedOver, waitedOut atomic.Int32
	leader, token := sidecartest.AwaitLeader(t, live, 10*time.Second)
	for _, d := range delays {
		// A term shorter than one sample would be missing from the terms
		// counted at the end.
		log.AwaitSampled(t, token)
		how := fmt.Sprintf("killed %v after SIGTERM", d)
		switch d {
		case stopped:
			how = "killed while stopped"
		case exited:
			how = "exited after SIGTERM"
		}
		killed.Store(leader, true)
		at := time.Now()
		if d == stopped {
			leader.Signal(syscall.SIGSTOP)
		}
		leader.Signal(syscall.SIGTERM)
		switch d {
		case stopped:
		case exited:
			if code := leader.WaitExit(5 * time.Second); code != 0 {
				t.Fatalf("%s: exit status %d, want 0", how, code)
			}
		default:
			time.Sleep(d)
		}
		_ = leader.Cmd().Process.Signal(syscall.SIGKILL) // it may have exited, its release done
		leader.WaitExit(5 * time.Second)
		live = sidecartest.Without(live, leader)
		next, tok := sidecartest.AwaitLeader(t, live, sidecartest.LeaseDuration+3*sidecartest.RetryPeriod+time.Second)
		took := time.Since(at)
		if tok != token+1 {
			t.Fatalf("%s: the next leader has token %d, want %d", how, tok, token+1)
		}
		atOnce := took < sidecartest.LeaseDuration/2
		if atOnce {
			handedOver.Add(1)
		} else {
			waitedOut.Add(1)
		}
		if (d == stopped && atOnce) || (d == exited && !atOnce) {
			t.Errorf("%s: the next leader led %v later; want the lease waited out if it never released, at once if it did", how, took)
		}
		t.Logf("%s: token %d after %v", how, tok, took.Round(time.Millisecond))
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
