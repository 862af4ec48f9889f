package process

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// release sends POST /leader/release to s and returns the status and the
// answer.
func release(t *testing.T, s *sidecartest.Sidecar) (int, sidecartest.State) {
	t.Helper()
	resp, err := sidecartest.Client.Post("http://"+s.Addr()+"/leader/release", "", nil)
	if err != nil {
		t.Fatalf("POST /leader/release: %v", err)
	}
	defer resp.Body.Close()
	var st sidecartest.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("POST /leader/release answered %s with a body that is not JSON: %v", resp.Status, err)
	}
	return resp.StatusCode, st
}

// Releasing a standby is refused with 409 and changes nothing: when the
// leader is then released, a standby takes over at once, not after a
// hold-off. Every replica is sampled throughout; no two claim at once.
func TestReleaseOnAStandbyIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	all := sidecartest.StartMany(t, sidecartest.DBPath(t), 3)
	old, token := sidecartest.AwaitSettledLeader(t, all, 10*time.Second)
	holder := sidecartest.IdentityOf(t, old)
	standbys := sidecartest.Without(all, old)

	var set sidecartest.Members
	var names []string
	for _, s := range all {
		set.Add(s.Addr(), s, 0)
		names = append(names, s.Addr())
	}
	var log sidecartest.ClaimLog
	halt := log.SweepUntilHalted(sidecartest.SweepEvery, set.All)
	defer halt()
	time.Sleep(200 * time.Millisecond) // the sweeps see the first term

	for _, s := range standbys {
		code, st := release(t, s)
		if code != http.StatusConflict || !strings.Contains(st.Error, "not the leader") || st.Leader || st.Holder != holder {
			t.Fatalf("POST /leader/release on a standby: %d %+v, want 409 naming the holder %s", code, st, holder)
		}
	}
	if st, err := old.Leader(); err != nil || !st.Leader || *st.Token != token {
		t.Fatalf("after the standbys' refused releases the leader answers %+v, %v", st, err)
	}

	released := time.Now()
	if code, st := release(t, old); code != http.StatusOK || st.Leader || st.Error != "" {
		t.Fatalf("POST /leader/release on the leader: %d %+v", code, st)
	}
	// A standby held off by its own release would wait a whole hold-off
	// (the lease duration, 3s); one that was not takes over within the
	// store's change signal.
	next, nextToken := sidecartest.AwaitLeader(t, standbys, sidecartest.LeaseDuration)
	took := time.Since(released)
	if nextToken != token+1 {
		t.Fatalf("a standby leads with token %d after the release, want %d", nextToken, token+1)
	}
	if took > time.Second {
		t.Fatalf("a standby took over %v after the leader released, want well under the %v hold-off", took, sidecartest.LeaseDuration)
	}
	sidecartest.Steady(t, all, next, nextToken, 500*time.Millisecond)
	halt()

	if errs := log.Failed(names...); len(errs) > 0 {
		t.Fatalf("live sidecars did not answer: %v", errs)
	}
	terms := log.Check(t)
	if terms[sidecartest.Term{Token: token}] == 0 || terms[sidecartest.Term{Token: nextToken}] == 0 {
		t.Fatalf("the sweeps saw terms %v, want %d and %d", terms, token, nextToken)
	}
	t.Logf("hand-off after releasing the leader (both standbys' releases refused first): %v", took.Round(time.Millisecond))
}
