package sidecartest

import (
	"testing"
	"time"
)

// WaitTrue polls cond every 10ms and fails t if it is not true within.
func WaitTrue(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// AwaitToken polls until exactly one live sidecar claims leadership, with
// token want. Unlike AwaitLeader it tolerates two claims in one sweep (a
// Recorder or ClaimLog judges overlaps).
func AwaitToken(t testing.TB, all []*Sidecar, want int64, within time.Duration) *Sidecar {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var ls []*Sidecar
		var tok int64
		for _, s := range all {
			if st, err := s.Leader(); err == nil && st.Leader {
				ls, tok = append(ls, s), *st.Token
			}
		}
		if len(ls) == 1 && tok == want {
			return ls[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no single leader with token %d within %v", want, within)
	return nil
}

// Steady fails t unless every sweep for d shows exactly s leading with tok.
func Steady(t testing.TB, all []*Sidecar, s *Sidecar, tok int64, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		ls, sts := Leaders(t, all)
		if len(ls) != 1 || ls[0] != s || *sts[0].Token != tok {
			t.Fatalf("%d leaders in a sweep (want the same one with token %d): %+v", len(ls), tok, sts)
		}
	}
}

// AwaitSettled waits until every sidecar names leader as the holder (all
// have read the record and its token) and the leader has renewed twice
// since, so that a fault meets a running election rather than one still
// starting up (a standby's watch takes tens of milliseconds to start).
// It fails t if the leader's term ends meanwhile.
func AwaitSettled(t testing.TB, all []*Sidecar, leader *Sidecar) {
	t.Helper()
	st, err := leader.Leader()
	if err != nil || !st.Leader {
		t.Fatalf("the sidecar to settle on answers %+v %v, not leader", st, err)
	}
	if !settle(t, all, leader, *st.Token) {
		t.Fatalf("the term of token %d ended while the election settled", *st.Token)
	}
}

// AwaitSettledLeader waits for a leader (AwaitLeader) and for the election
// to settle around it (AwaitSettled), and returns it with its token. A
// term that ends while the election settles is waited past, up to twice:
// on a loaded machine a store that answers a renewal after the renew
// deadline ends the term, as it must, and the fault a test plays next
// needs a running election, not that one term.
func AwaitSettledLeader(t testing.TB, all []*Sidecar, within time.Duration) (*Sidecar, int64) {
	t.Helper()
	for tries := 1; ; tries++ {
		leader, token := AwaitLeader(t, all, within)
		if settle(t, all, leader, token) {
			return leader, token
		}
		if tries == 3 {
			t.Fatalf("the term of token %d ended while the election settled, the third term in a row", token)
		}
		t.Logf("the term of token %d ended while the election settled; waiting for the next", token)
	}
}

// settle waits until every sidecar names leader as the holder and leader
// has renewed the term of token twice since. It returns false as soon as
// leader answers that it no longer leads with token.
func settle(t testing.TB, all []*Sidecar, leader *Sidecar, token int64) bool {
	t.Helper()
	id := IdentityOf(t, leader)
	for _, s := range all {
		WaitTrue(t, "every sidecar has seen the record", 10*time.Second, func() bool {
			st, err := s.Leader()
			return err == nil && st.Holder == id
		})
	}
	var last time.Time
	renewals, ended := -1, false
	// Two renew intervals, and a lease duration for the writes on a loaded
	// machine: a bound on the wait, not on how fast a leader renews.
	WaitTrue(t, "the leader renews twice", 2*RenewInterval+LeaseDuration, func() bool {
		st, err := leader.Leader()
		switch {
		case err != nil:
		case !st.Leader || *st.Token != token:
			ended = true
		case st.ValidUntil.After(last):
			last, renewals = *st.ValidUntil, renewals+1
		}
		return ended || renewals >= 2
	})
	return !ended
}

// AllAlive fails t if any sidecar has exited, with its logs.
func AllAlive(t testing.TB, all []*Sidecar) {
	t.Helper()
	for _, s := range all {
		if !s.Alive() {
			t.Fatalf("sidecar %d exited: %v\n%s", s.Pid(), s.exitErr, s.logs.String())
		}
	}
}

// AwaitLeads waits until s answers leader:true with token, failing t if
// that takes longer than within from began; it returns how long it took.
func AwaitLeads(t testing.TB, s *Sidecar, token int64, began time.Time, within time.Duration) time.Duration {
	t.Helper()
	for {
		st, err := s.Leader()
		took := time.Since(began)
		if err == nil && st.Leader && *st.Token == token {
			return took
		}
		if took > within {
			t.Fatalf("sidecar %d does not lead with token %d %v after the hand-off was asked for (it answers %+v, %v)",
				s.Pid(), token, within, st, err)
		}
		time.Sleep(time.Millisecond)
	}
}
