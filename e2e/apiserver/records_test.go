package apiserver

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestRecordDeletedOrEmptied changes the record by hand under three
// sidecars, on each backend, while every sidecar is asked GET /leader
// every 10ms; no sweep may have two leader:true answers and no older term
// may be claimed after a newer one did (t is the leader's token):
//
//	case              leader before the change   afterwards
//	deleted-live      running                    it recreates the record at once with t+1 (still inside its
//	                                             claim), never answering leader:false; the standbys would wait a
//	                                             lease duration
//	deleted-paused    SIGSTOP                    a standby creates it with t+1, not before a lease duration after
//	                                             the deletion, when the paused claim is over; after SIGCONT the old
//	                                             leader answers leader:false
//	emptied-live      running                    holder "" with the lease duration and times kept (an edit, not a
//	                                             release): the leader takes it back with t+1, never answering
//	                                             leader:false
//	emptied-killed    SIGKILL                    the same edit is waited out: a standby takes over with t+1, not
//	                                             before a lease duration after the edit
//	released-killed   SIGKILL                    a release as client-go writes it (holder "", lease 1s, acquire
//	                                             time = renew time): a standby takes over at once with t+1
func TestRecordDeletedOrEmptied(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		freeze syscall.Signal // sent to the leader just before the change (0: none)
		change func(recordStore) func() error
		same   bool // the leader keeps leading (t+1), else a standby takes over
		// leases a standby waits before it leads: 0 takes over at once; an
		// emptied record is waited out for one lease duration; a deleted
		// one is recreated after one and claimed after another.
		leases int
	}{
		{"deleted-live", 0, func(s recordStore) func() error { return s.remove }, true, 0},
		{"deleted-paused", syscall.SIGSTOP, func(s recordStore) func() error { return s.remove }, false, 2},
		{"emptied-live", 0, func(s recordStore) func() error { return s.empty }, true, 0},
		{"emptied-killed", syscall.SIGKILL, func(s recordStore) func() error { return s.empty }, false, 1},
		{"released-killed", syscall.SIGKILL, func(s recordStore) func() error { return s.release }, false, 0},
	}
	backends := map[string]func(*testing.T) recordStore{"lease": leaseStore, "sqlite": sqliteStore}
	for _, b := range []string{"lease", "sqlite"} {
		t.Run(b, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					store := backends[b](t)
					recordChanged(t, store, c.freeze, c.change(store), c.same, c.leases)
				})
			}
		})
	}
}

func recordChanged(t *testing.T, store recordStore, freeze syscall.Signal, change func() error, same bool, leases int) {
	var all []*sidecartest.Sidecar
	var set sidecartest.Members
	for i := range 3 {
		s := store.start(fmt.Sprintf("app-%d", i))
		all = append(all, s)
		set.Add(s.Addr(), s, 0)
	}
	old, token := sidecartest.AwaitSettledLeader(t, all, 15*time.Second)
	rest := sidecartest.Without(all, old)

	var log sidecartest.ClaimLog
	halt := log.SweepUntilHalted(sidecartest.SweepEvery, set.All)
	defer halt()
	time.Sleep(200 * time.Millisecond)

	frozen := time.Now()
	if freeze != 0 {
		old.Signal(freeze)
	}
	if freeze == syscall.SIGKILL {
		old.WaitExit(5 * time.Second)
	}
	at := time.Now()
	if err := change(); err != nil {
		t.Fatalf("changing the record: %v", err)
	}
	changed := time.Now()
	var leader *sidecartest.Sidecar
	next := token + 1
	if same {
		leader = sidecartest.AwaitToken(t, all, next, sidecartest.RenewInterval+time.Second)
		if leader != old {
			t.Fatalf("a standby leads with token %d; the leader, still inside its claim, should", next)
		}
	} else {
		within := time.Second
		if leases > 0 {
			within = time.Duration(leases)*sidecartest.LeaseDuration + 3*sidecartest.RetryPeriod + time.Second
		}
		// A recreated record's creator claims it a lease duration after
		// it wrote it, the very moment the other standby may take it over
		// as an expired record with one more token: either may lead.
		leader, next = sidecartest.AwaitLeader(t, rest, within)
		if next != token+1 && (leases < 2 || next != token+2) {
			t.Fatalf("a standby leads with token %d after the change, want %d", next, token+1)
		}
	}
	var woke time.Time
	if freeze == syscall.SIGSTOP {
		time.Sleep(200 * time.Millisecond)
		woke = time.Now()
		old.Signal(syscall.SIGCONT)
	}
	asked := all
	if freeze == syscall.SIGKILL {
		asked = rest
	}
	sidecartest.Steady(t, asked, leader, next, sidecartest.LeaseDuration)
	end := time.Now()
	halt()
	if !woke.IsZero() {
		// A request sent while the leader was frozen is answered after it
		// wakes, when the new term has begun: it must disown the old one.
		for _, c := range log.Claims() {
			if c.Who == old.Addr() && c.Answer.After(woke) && c.Term.Token == token {
				t.Fatalf("the old leader answered leader:true with token %d %v after waking", token, c.Answer.Sub(woke))
			}
		}
	}

	terms := log.Check(t)
	var live []string
	for _, m := range set.All() {
		if m.Sidecar != old || freeze == 0 {
			live = append(live, m.Name)
		}
	}
	if errs := log.Failed(live...); len(errs) > 0 {
		t.Fatalf("live sidecars did not answer: %v", errs)
	}
	store.shows(t, sidecartest.IdentityOf(t, leader), next)
	who, first := log.FirstClaim(sidecartest.Term{Epoch: 0, Token: next})
	if who != leader.Addr() {
		t.Fatalf("the first claim of token %d came from %s, not the leader %s", next, who, leader.Addr())
	}
	took := first.Sub(at)
	switch {
	case first.Before(at.Add(time.Duration(leases) * sidecartest.LeaseDuration)):
		t.Fatalf("a standby led with token %d %v after the change, before %d lease durations (%v each)", next, took, leases, sidecartest.LeaseDuration)
	case freeze == syscall.SIGSTOP && first.Before(frozen.Add(sidecartest.RenewDeadline)):
		t.Fatalf("a standby led %v after the leader froze, while its claim could still hold (renew deadline %v)",
			first.Sub(frozen), sidecartest.RenewDeadline)
	}
	// The leader, still inside its claim, goes from t to t+1 without ever
	// disowning its term; a longest leaderless run of sweeps is reported,
	// not bounded: on a loaded machine a slow answer alone makes one.
	gap := log.Leaderless(at, end, sidecartest.SweepEvery)
	if denied := log.Denials(old.Addr(), at, end); same && len(denied) > 0 {
		t.Fatalf("the leader answered leader:false %d times after the change (first %v after it); it should have kept leading",
			len(denied), denied[0].Answer.Sub(at).Round(time.Millisecond))
	}
	t.Logf("token %d -> %d (same holder %v): first claimed %v after the change (which took %v); longest leaderless run %v; "+
		"%d sweeps every %v, %d answers, claims per term %v; overlaps 0, sweeps with two leaders 0",
		token, next, leader == old, took.Round(time.Millisecond), changed.Sub(at).Round(time.Millisecond),
		gap.Round(time.Millisecond), log.Sweeps(), sidecartest.SweepEvery, log.Asked(), terms)
}
