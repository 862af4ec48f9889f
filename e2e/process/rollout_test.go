package process

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// A rollout on SQLite, three replicas of two revisions at every step: the
// leader (revision r), a standby of r and one of the other revision. On
// SIGTERM the leader hands off to the standby of the other revision, every
// time, with the next token; the stopped replica is replaced by one of the
// new leader's revision, so the next round hands back the other way. The
// sweeps ask every replica every 10ms: never two claims at once.
func TestStoppingLeaderHandsToTheOtherRevision(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	var set sidecartest.Members
	started := 0
	launch := func(rev string) *sidecartest.Sidecar {
		name := fmt.Sprintf("%s-%d", rev, started)
		started++
		s := sidecartest.Spawn(t, []string{"POD_TEMPLATE_HASH=" + rev}, "--sqlite-path", db, "--identity", name)
		s.WaitServing()
		set.Add(name, s, 0)
		return s
	}
	revOf := func(s *sidecartest.Sidecar) string {
		return strings.SplitN(podOf(t, s), "-", 2)[0]
	}
	leader := launch("old")
	_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{leader}, 10*time.Second)
	live := []*sidecartest.Sidecar{leader, launch("old"), launch("new")}
	sidecartest.AwaitSettled(t, live, leader)
	log := &sidecartest.ClaimLog{}
	halt := log.SweepUntilHalted(sidecartest.SweepEvery, set.All)
	defer halt()
	time.Sleep(200 * time.Millisecond)

	const rounds = 4
	var took []time.Duration
	for round := range rounds {
		from := revOf(leader)
		standbys := sidecartest.Without(live, leader)
		began := time.Now()
		leader.Signal(syscall.SIGTERM)
		next, nextToken := sidecartest.AwaitLeader(t, standbys, sidecartest.LeaseDuration)
		took = append(took, time.Since(began))
		if revOf(next) == from || nextToken != token+1 {
			t.Fatalf("round %d: the leader of revision %s stopped and %s leads with token %d; want the standby of the other revision with token %d",
				round, from, podOf(t, next), nextToken, token+1)
		}
		if code := leader.WaitExit(5 * time.Second); code != 0 {
			t.Fatalf("round %d: the stopped leader exited %d", round, code)
		}
		sidecartest.Steady(t, standbys, next, nextToken, 300*time.Millisecond)
		leader, token = next, nextToken
		live = append(standbys, launch(revOf(next)))
		sidecartest.AwaitSettled(t, live, leader)
	}
	halt()
	var names []string // the replicas still running; the stopped ones close their listener first
	for _, m := range set.All() {
		if slices.Contains(live, m.Sidecar) {
			names = append(names, m.Name)
		}
	}
	if errs := log.Failed(names...); len(errs) > 0 {
		t.Fatalf("live sidecars did not answer: %v", errs)
	}
	terms := log.Check(t)
	if len(terms) != rounds+1 {
		t.Fatalf("the sweeps saw terms %v, want %d", terms, rounds+1)
	}
	t.Logf("%d stops, each handed to the other revision; the next leader led after %v (%d sweeps of every replica, no overlap)",
		rounds, took, log.Sweeps())
}
