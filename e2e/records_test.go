package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// TestRecordDeletedOrEmptied changes the record by hand under three
// sidecars, on each backend, while every sidecar is asked GET /leader
// every 10ms; no sweep may have two leader:true answers and no older term
// may be claimed after a newer one did (t is the leader's token):
//
//	case              leader before the change   afterwards
//	deleted-live      running                    it recreates the record at once with t+1 (still inside its
//	                                             claim); never leaderless; the standbys would wait a lease duration
//	deleted-paused    SIGSTOP                    a standby creates it with t+1, not before a lease duration after
//	                                             the deletion, when the paused claim is over; after SIGCONT the old
//	                                             leader answers leader:false
//	emptied-live      running                    holder "" with the lease duration and times kept (an edit, not a
//	                                             release): the leader takes it back with t+1; never leaderless
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
	var all []*sidecar
	var set members
	for i := range 3 {
		s := store.start(fmt.Sprintf("app-%d", i))
		all = append(all, s)
		set.add(s.addr, s, 0)
	}
	old, token := awaitLeader(t, all, 15*time.Second)
	awaitSettled(t, all, old)
	rest := without(all, old)

	var log claimLog
	halt := log.sweepUntilHalted(sweepEvery, set.all)
	defer halt()
	time.Sleep(200 * time.Millisecond)

	frozen := time.Now()
	if freeze != 0 {
		old.signal(freeze)
	}
	if freeze == syscall.SIGKILL {
		old.waitExit(5 * time.Second)
	}
	at := time.Now()
	if err := change(); err != nil {
		t.Fatalf("changing the record: %v", err)
	}
	changed := time.Now()
	var leader *sidecar
	next := token + 1
	if same {
		leader = awaitToken(t, all, next, renewInterval+time.Second)
		if leader != old {
			t.Fatalf("a standby leads with token %d; the leader, still inside its claim, should", next)
		}
	} else {
		within := time.Second
		if leases > 0 {
			within = time.Duration(leases)*leaseDuration + 3*retryPeriod + time.Second
		}
		// A recreated record's creator claims it a lease duration after
		// it wrote it, the very moment the other standby may take it over
		// as an expired record with one more token: either may lead.
		leader, next = awaitLeader(t, rest, within)
		if next != token+1 && (leases < 2 || next != token+2) {
			t.Fatalf("a standby leads with token %d after the change, want %d", next, token+1)
		}
	}
	var woke time.Time
	if freeze == syscall.SIGSTOP {
		time.Sleep(200 * time.Millisecond)
		woke = time.Now()
		old.signal(syscall.SIGCONT)
	}
	asked := all
	if freeze == syscall.SIGKILL {
		asked = rest
	}
	steady(t, asked, leader, next, leaseDuration)
	end := time.Now()
	halt()
	if !woke.IsZero() {
		// A request sent while the leader was frozen is answered after it
		// wakes, when the new term has begun: it must disown the old one.
		log.mu.Lock()
		for _, c := range log.claims {
			if c.who == old.addr && c.answer.After(woke) && c.term.token == token {
				t.Fatalf("the old leader answered leader:true with token %d %v after waking", token, c.answer.Sub(woke))
			}
		}
		log.mu.Unlock()
	}

	terms := log.check(t)
	var live []string
	for _, m := range set.all() {
		if m.s != old || freeze == 0 {
			live = append(live, m.name)
		}
	}
	if errs := log.failed(live...); len(errs) > 0 {
		t.Fatalf("live sidecars did not answer: %v", errs)
	}
	store.shows(t, identityOf(t, leader), next)
	who, first := log.firstClaim(term{0, next})
	if who != leader.addr {
		t.Fatalf("the first claim of token %d came from %s, not the leader %s", next, who, leader.addr)
	}
	took := first.Sub(at)
	switch {
	case first.Before(at.Add(time.Duration(leases) * leaseDuration)):
		t.Fatalf("a standby led with token %d %v after the change, before %d lease durations (%v each)", next, took, leases, leaseDuration)
	case freeze == syscall.SIGSTOP && first.Before(frozen.Add(renewDeadline)):
		t.Fatalf("a standby led %v after the leader froze, while its claim could still hold (renew deadline %v)",
			first.Sub(frozen), renewDeadline)
	}
	gap := log.leaderless(at, end, sweepEvery)
	if same && gap > 250*time.Millisecond {
		t.Fatalf("no leader for %v after the change; the leader should have kept leading", gap)
	}
	t.Logf("token %d -> %d (same holder %v): first claimed %v after the change (which took %v); longest leaderless run %v; "+
		"%d sweeps every %v, %d answers, claims per term %v; overlaps 0, sweeps with two leaders 0",
		token, next, leader == old, took.Round(time.Millisecond), changed.Sub(at).Round(time.Millisecond),
		gap.Round(time.Millisecond), len(log.sweeps), sweepEvery, log.asked, terms)
}
