package process

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// app is a replica's application: a health endpoint whose answer the test
// sets.
type app struct {
	healthy atomic.Bool
	srv     *httptest.Server
}

func newApp(t *testing.T, healthy bool) *app {
	a := &app{}
	a.healthy.Store(healthy)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !a.healthy.Load() {
			http.Error(w, "not well", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// healthGated starts a sidecar on db gated on a's health, checked every
// 100ms, three results in a row to change its verdict. A check keeps the
// default one-second timeout: these apps fail by answering 503 at once, so
// a slow answer on a loaded machine must not count as a failure.
func healthGated(t *testing.T, db string, a *app) *sidecartest.Sidecar {
	return sidecartest.Start(t, db, "--app-health-url", a.srv.URL+"/healthz",
		"--app-health-period", "100ms", "--app-health-failures", "3")
}

func appHealthy(t *testing.T, s *sidecartest.Sidecar) bool {
	t.Helper()
	st, err := s.Leader()
	if err != nil || st.AppHealthy == nil {
		t.Fatalf("GET /leader: %+v, %v; want appHealthy", st, err)
	}
	return *st.AppHealthy
}

// A leader whose app turns unhealthy releases at once: a standby whose app
// is healthy leads with the next token within a second (three failed
// checks 100ms apart, then a release), never while the old leader still
// claims. A blip shorter than three checks moves nothing; the old
// leader's app healthy again makes it a standby, not the leader.
func TestUnhealthyAppHandsLeadershipOver(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	apps := []*app{newApp(t, true), newApp(t, true), newApp(t, true)}
	var all []*sidecartest.Sidecar
	var set sidecartest.Members
	for _, a := range apps {
		s := healthGated(t, db, a)
		all = append(all, s)
		set.Add(s.Addr(), s, 0)
	}
	old, token := sidecartest.AwaitSettledLeader(t, all, 10*time.Second)
	oldApp := apps[indexOf(all, old)]

	var log sidecartest.ClaimLog
	halt := log.SweepUntilHalted(sidecartest.SweepEvery, set.All)
	defer halt()

	// A blip: two failed checks, then healthy again.
	oldApp.healthy.Store(false)
	time.Sleep(150 * time.Millisecond)
	oldApp.healthy.Store(true)
	sidecartest.Steady(t, all, old, token, time.Second)

	oldApp.healthy.Store(false)
	failed := time.Now()
	next, nextToken := sidecartest.AwaitLeader(t, sidecartest.Without(all, old), 5*time.Second)
	took := time.Since(failed)
	if nextToken != token+1 {
		t.Fatalf("token %d after the leader's app failed, want %d", nextToken, token+1)
	}
	if took > time.Second {
		t.Errorf("a healthy standby led %v after the leader's app failed, want under 1s", took)
	}
	if appHealthy(t, old) || !appHealthy(t, next) {
		t.Errorf("appHealthy: old leader %v, new leader %v; want false, true", appHealthy(t, old), appHealthy(t, next))
	}

	oldApp.healthy.Store(true)
	sidecartest.WaitTrue(t, "the old leader's app healthy again", 2*time.Second, func() bool { return appHealthy(t, old) })
	sidecartest.Steady(t, all, next, nextToken, sidecartest.LeaseDuration)
	halt()

	if errs := log.Failed(); len(errs) > 0 {
		t.Fatalf("live sidecars did not answer: %v", errs)
	}
	terms := log.Check(t)
	if terms[sidecartest.Term{Token: token}] == 0 || terms[sidecartest.Term{Token: nextToken}] == 0 {
		t.Fatalf("the sweeps saw terms %v, want %d and %d", terms, token, nextToken)
	}
	t.Logf("hand-over after the leader's app failed: %v (3 checks 100ms apart); %d sweeps, 0 overlaps", took.Round(time.Millisecond), log.Sweeps())
}

// No replica leads while every app is unhealthy, however long that lasts;
// the first whose app turns healthy leads at once.
func TestNoLeaderWhileEveryAppIsUnhealthy(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	apps := []*app{newApp(t, false), newApp(t, false)}
	all := []*sidecartest.Sidecar{healthGated(t, db, apps[0]), healthGated(t, db, apps[1])}
	time.Sleep(2 * sidecartest.LeaseDuration)
	for _, s := range all {
		if st, err := s.Leader(); err != nil || st.Leader || appHealthy(t, s) {
			t.Fatalf("with every app unhealthy a sidecar answers %+v, %v", st, err)
		}
	}
	apps[1].healthy.Store(true)
	healthy := time.Now()
	leader, _ := sidecartest.AwaitLeader(t, all, 5*time.Second)
	if leader != all[1] {
		t.Fatalf("the sidecar of the unhealthy app leads")
	}
	t.Logf("led %v after its app's first successful check was possible", time.Since(healthy).Round(time.Millisecond))
}

func indexOf(all []*sidecartest.Sidecar, s *sidecartest.Sidecar) int {
	for i, x := range all {
		if x == s {
			return i
		}
	}
	return -1
}

// A replica whose app is unhealthy takes no hand-off: named, it does not
// answer (422, the leader keeps its token); to anyone, the healthy standby
// takes it.
func TestHandoffSkipsAnUnhealthyStandby(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	apps := []*app{newApp(t, true), newApp(t, true), newApp(t, true)}
	var all []*sidecartest.Sidecar
	for _, a := range apps {
		all = append(all, healthGated(t, db, a))
	}
	leader, token := sidecartest.AwaitSettledLeader(t, all, 10*time.Second)
	standbys := sidecartest.Without(all, leader)
	sick, well := standbys[0], standbys[1]
	apps[indexOf(all, sick)].healthy.Store(false)
	sidecartest.WaitTrue(t, "the standby's app unhealthy", 2*time.Second, func() bool { return !appHealthy(t, sick) })

	code, st, err := leader.Handoff(sidecartest.IdentityOf(t, sick))
	if err != nil || code != http.StatusUnprocessableEntity || !st.Leader || *st.Token != token {
		t.Fatalf("hand-off to the unhealthy standby: %d %+v %v; want 422 and the leader keeping token %d", code, st, err, token)
	}
	code, st, err = leader.Handoff("")
	if err != nil || code != http.StatusOK || st.Leader {
		t.Fatalf("hand-off to anyone: %d %+v %v", code, st, err)
	}
	if next, nextToken := sidecartest.AwaitLeader(t, all, 5*time.Second); next != well || nextToken != token+1 {
		t.Fatalf("after the hand-off to anyone the unhealthy standby leads, or token %d (want %d)", nextToken, token+1)
	}
}
