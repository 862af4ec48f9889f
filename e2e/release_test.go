package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// release sends POST /leader/release to s and returns the status and the
// answer.
func (s *sidecar) release() (int, state) {
	s.t.Helper()
	resp, err := client.Post("http://"+s.addr+"/leader/release", "", nil)
	if err != nil {
		s.t.Fatalf("POST /leader/release: %v", err)
	}
	defer resp.Body.Close()
	var st state
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		s.t.Fatalf("POST /leader/release answered %s with a body that is not JSON: %v", resp.Status, err)
	}
	return resp.StatusCode, st
}

// Releasing a standby is refused with 409 and changes nothing: when the
// leader is then released, a standby takes over at once, not after a
// hold-off. Every replica is sampled throughout; no two claim at once.
func TestReleaseOnAStandbyIsRefusedAndChangesNothing(t *testing.T) {
	all := startMany(t, dbPath(t), 3)
	old, token := awaitLeader(t, all, 10*time.Second)
	awaitSettled(t, all, old)
	holder := identityOf(t, old)
	standbys := without(all, old)

	var set members
	var names []string
	for _, s := range all {
		set.add(s.addr, s, 0)
		names = append(names, s.addr)
	}
	var log claimLog
	halt := log.sweepUntilHalted(sweepEvery, set.all)
	defer halt()
	time.Sleep(200 * time.Millisecond) // the sweeps see the first term

	for _, s := range standbys {
		code, st := s.release()
		if code != http.StatusConflict || !strings.Contains(st.Error, "not the leader") || st.Leader || st.Holder != holder {
			t.Fatalf("POST /leader/release on a standby: %d %+v, want 409 naming the holder %s", code, st, holder)
		}
	}
	if st, err := old.leader(); err != nil || !st.Leader || *st.Token != token {
		t.Fatalf("after the standbys' refused releases the leader answers %+v, %v", st, err)
	}

	released := time.Now()
	if code, st := old.release(); code != http.StatusOK || st.Leader || st.Error != "" {
		t.Fatalf("POST /leader/release on the leader: %d %+v", code, st)
	}
	// A standby held off by its own release would wait a whole hold-off
	// (the lease duration, 3s); one that was not takes over within the
	// store's change signal.
	next, nextToken := awaitLeader(t, standbys, leaseDuration)
	took := time.Since(released)
	if nextToken != token+1 {
		t.Fatalf("a standby leads with token %d after the release, want %d", nextToken, token+1)
	}
	if took > time.Second {
		t.Fatalf("a standby took over %v after the leader released, want well under the %v hold-off", took, leaseDuration)
	}
	steady(t, all, next, nextToken, 500*time.Millisecond)
	halt()

	if errs := log.failed(names...); len(errs) > 0 {
		t.Fatalf("live sidecars did not answer: %v", errs)
	}
	terms := log.check(t)
	if terms[term{0, token}] == 0 || terms[term{0, nextToken}] == 0 {
		t.Fatalf("the sweeps saw terms %v, want %d and %d", terms, token, nextToken)
	}
	t.Logf("hand-off after releasing the leader (both standbys' releases refused first): %v", took.Round(time.Millisecond))
}
