package process

import (
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

func TestManyStartAtOnceExactlyOneLeads(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		all := sidecartest.StartMany(t, sidecartest.DBPath(t), 8)
		sidecartest.AwaitLeader(t, all, 10*time.Second)
		// Every sweep of the steady state shows one leader, the same one,
		// and every follower names it as the holder.
		var first string
		for range 20 {
			ls, sts := sidecartest.Leaders(t, all)
			if len(ls) != 1 {
				t.Fatalf("round %d: %d leaders in a sweep, want 1", round, len(ls))
			}
			if first == "" {
				first = sts[0].Identity
			}
			if sts[0].Identity != first || *sts[0].Token != 1 {
				t.Fatalf("round %d: leader changed to %s token %d without any fault", round, sts[0].Identity, *sts[0].Token)
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, s := range all {
			if st, err := s.Leader(); err != nil || (!st.Leader && st.Holder != first) {
				t.Fatalf("round %d: follower sees holder %q (err %v), want %q", round, st.Holder, err, first)
			}
			s.Signal(syscall.SIGKILL)
		}
	}
}

func TestKilledLeaderIsReplacedAfterTheLeaseWithTheNextToken(t *testing.T) {
	t.Parallel()
	all := sidecartest.StartMany(t, sidecartest.DBPath(t), 3)
	old, token := sidecartest.AwaitLeader(t, all, 10*time.Second)
	killed := time.Now()
	old.Signal(syscall.SIGKILL)
	old.WaitExit(10 * time.Second)

	next, nextToken := sidecartest.AwaitLeader(t, sidecartest.Without(all, old), 3*sidecartest.LeaseDuration)
	waited := time.Since(killed)
	if next == old || nextToken != token+1 {
		t.Fatalf("new leader token %d, want %d", nextToken, token+1)
	}
	// The last renewal was at most one renew interval before the kill, and
	// a standby waits a whole lease duration after seeing it.
	if min := sidecartest.LeaseDuration - sidecartest.RenewInterval; waited < min {
		t.Fatalf("standby took over %v after the kill, before the lease could have run out (%v)", waited, min)
	}
	t.Logf("fail-over after kill -9: %v (lease %v)", waited.Round(time.Millisecond), sidecartest.LeaseDuration)
}

func TestTerminatedLeaderHandsOffWithinASecond(t *testing.T) {
	t.Parallel()
	all := sidecartest.StartMany(t, sidecartest.DBPath(t), 3)
	old, token := sidecartest.AwaitLeader(t, all, 10*time.Second)
	signalled := time.Now()
	old.Signal(syscall.SIGTERM)

	next, nextToken := sidecartest.AwaitLeader(t, sidecartest.Without(all, old), sidecartest.LeaseDuration)
	took := time.Since(signalled)
	if code := old.WaitExit(10 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit status %d, want 0", code)
	}
	if next == old || nextToken != token+1 {
		t.Fatalf("new leader token %d, want %d", nextToken, token+1)
	}
	// Without the hand-off, a standby would wait out the lease: at least
	// sidecartest.LeaseDuration-sidecartest.RetryPeriod (2.5s) after the signal.
	if took > time.Second {
		t.Fatalf("hand-off took %v, want about a second at most (offer, accept, transfer)", took)
	}
	if !strings.Contains(old.Logs(), "handed leadership off on shutdown") {
		t.Fatal("the old leader did not log its hand-off")
	}
	t.Logf("hand-off after SIGTERM: %v", took.Round(time.Millisecond))
}

func TestPausedLeaderAnswersNotLeaderOnWaking(t *testing.T) {
	t.Parallel()
	all := sidecartest.StartMany(t, sidecartest.DBPath(t), 2)
	paused, token := sidecartest.AwaitLeader(t, all, 10*time.Second)
	paused.Signal(syscall.SIGSTOP)
	next, nextToken := sidecartest.AwaitLeader(t, sidecartest.Without(all, paused), 3*sidecartest.LeaseDuration)
	if nextToken != token+1 {
		t.Fatalf("successor token %d, want %d", nextToken, token+1)
	}

	// Send the request while the leader is still frozen: the kernel queues
	// it, and the first thing the process does on waking is answer it.
	conn, err := net.DialTimeout("tcp", paused.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /leader HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	paused.Signal(syscall.SIGCONT)
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
	if !strings.Contains(body, `"leader":false`) || !strings.Contains(body, `"token":null`) {
		t.Fatalf("first answer after waking:\n%s\nwant leader:false with a null token", body)
	}
	if _, sts := sidecartest.Leaders(t, all); len(sts) != 1 || sts[0].Identity == "" || next == paused {
		t.Fatal("the successor should still be the only leader")
	}
}

func TestTokensStrictlyIncreaseAcrossHandOffs(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	all := sidecartest.StartMany(t, db, 3)
	_, last := sidecartest.AwaitLeader(t, all, 10*time.Second)
	tokens := []int64{last}
	for range 8 {
		var live []*sidecartest.Sidecar
		for _, s := range all {
			if s.Alive() {
				live = append(live, s)
			}
		}
		leader, _ := sidecartest.AwaitLeader(t, live, 10*time.Second)
		leader.Signal(syscall.SIGTERM)
		leader.WaitExit(10 * time.Second)
		all = append(sidecartest.Without(all, leader), sidecartest.Start(t, db))
		_, token := sidecartest.AwaitLeader(t, all, 2*sidecartest.LeaseDuration)
		if token != last+1 {
			t.Fatalf("tokens so far %v, then %d: want each hand-off to add exactly one", tokens, token)
		}
		tokens = append(tokens, token)
		last = token
	}
	t.Logf("tokens across hand-offs: %v", tokens)
}

// TestClaimsNeverOverlapAcrossAHandOff polls every sidecar as fast as it
// answers while the leader hands off, and checks that no answer of an older
// term was sent after an answer of a newer term had arrived: the two terms
// never both claimed leadership at one instant.
func TestClaimsNeverOverlapAcrossAHandOff(t *testing.T) {
	t.Parallel()
	all := sidecartest.StartMany(t, sidecartest.DBPath(t), 4)
	leader, token := sidecartest.AwaitLeader(t, all, 10*time.Second)

	var log sidecartest.ClaimLog
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, s := range all {
		log.Sample(&wg, stop, s, func(err error) bool {
			if s != leader { // the leader is shutting down
				t.Errorf("GET /leader: %v", err)
			}
			return false
		})
	}
	log.AwaitSampled(t, token)
	leader.Signal(syscall.SIGTERM)
	_, next := sidecartest.AwaitLeader(t, sidecartest.Without(all, leader), sidecartest.LeaseDuration)
	log.AwaitSampled(t, next)
	time.Sleep(200 * time.Millisecond) // and a late claim of the term before
	close(stop)
	wg.Wait()

	terms := log.Check(t)
	if len(terms) != 2 {
		t.Fatalf("answers covered terms %v, want the two around the hand-off", terms)
	}
	t.Logf("leader answers checked per term: %v", terms)
}
