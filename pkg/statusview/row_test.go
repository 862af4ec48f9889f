package statusview

import (
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// observed is the observer's clock in these tests.
var observed = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// heldAt is an election held by holder since acquired ago, last renewed
// renewed ago, with a 15s lease.
func heldAt(name, holder string, token int64, acquired, renewed time.Duration) Election {
	return Election{Namespace: "shop", Name: name, Version: "42", Record: backend.Record{
		HolderIdentity: holder, LeaseDurationSeconds: 15, Transitions: token,
		AcquireTime: observed.Add(-acquired), RenewTime: observed.Add(-renewed),
	}}
}

// The state follows the record's times against the observer's clock: held
// while renewed within the lease, stale after, released without a holder;
// a shard group's member record, named after its group and its holder,
// is a member while renewed within its lease.
func TestRowState(t *testing.T) {
	released := heldAt("r", "", 4, time.Minute, time.Minute)
	released.Record.AcquireTime = released.Record.RenewTime
	noRenewal := heldAt("n", "a_1", 1, time.Minute, 0)
	noRenewal.Record.RenewTime = time.Time{}
	// Created 4s ago and not renewed since: the claim starts 11s on.
	created := heldAt("c", "a_1", 1, 4*time.Second, 0)
	created.Record.RenewTime = time.Time{}
	for _, c := range []struct {
		name  string
		e     Election
		state string
	}{
		{"renewed 2s ago", heldAt("e", "a_1", 3, time.Hour, 2*time.Second), StateHeld},
		{"renewed exactly a lease ago", heldAt("e", "a_1", 3, time.Hour, 15*time.Second), StateHeld},
		{"renewed just over a lease ago", heldAt("e", "a_1", 3, time.Hour, 15*time.Second+time.Millisecond), StateStale},
		{"renewed in the future (holder's clock ahead)", heldAt("e", "a_1", 3, time.Hour, -5*time.Second), StateHeld},
		{"released", released, StateReleased},
		{"held, no renew time", noRenewal, StateStale},
		{"created 4s ago, not renewed", created, StatePending},
		{"a shard group's member record", heldAt("shop-member-shop-0-x1", "shop-0_X1", 0, time.Hour, 2*time.Second), StateMember},
		{"a member record not renewed within its lease", heldAt("shop-member-shop-0-x1", "shop-0_X1", 0, time.Hour, time.Minute), StateStale},
		{"a shard's record", heldAt("shop-shard-3", "shop-0_X1", 2, time.Hour, 2*time.Second), StateHeld},
		{"a record named like a member of another holder", heldAt("shop-member-shop-0-x1", "shop-1_y", 1, time.Hour, 2*time.Second), StateHeld},
		{"a record named only after its holder", heldAt("-member-shop-0-x1", "shop-0_X1", 1, time.Hour, 2*time.Second), StateHeld},
	} {
		r := RowOf(c.e, observed)
		if r.State != c.state || r.Stale != (c.state == StateStale) {
			t.Errorf("%s: state %q stale %v, want %q", c.name, r.State, r.Stale, c.state)
		}
		if (r.ClaimFrom != nil) != (c.state == StatePending) {
			t.Errorf("%s: claimFrom %v in state %q", c.name, r.ClaimFrom, r.State)
		}
	}
	r := RowOf(created, observed)
	if want := observed.Add(11 * time.Second); r.ClaimFrom == nil || !r.ClaimFrom.Equal(want) {
		t.Errorf("created 4s ago with a 15s lease: claim from %v, want %v", r.ClaimFrom, want)
	}
	var out strings.Builder
	if err := (Table{}).Print(&out, []Row{r}, false); err != nil || !strings.Contains(out.String(), "claim pending, 11s left") {
		t.Errorf("the table shows %q (%v), want the claim pending, 11s left", out.String(), err)
	}
}

// A hand-off marker is pending while it belongs to the term: the holder's
// offer or accept at its token, or a transfer to the holder at its token.
func TestRowHandoffPending(t *testing.T) {
	for _, c := range []struct {
		name    string
		h       backend.Handoff
		pending bool
		cell    string
	}{
		{"offer to anyone", backend.Handoff{Phase: backend.HandoffOffer, From: "a_1", Token: 7}, true, "offered to any"},
		{"offer to b", backend.Handoff{Phase: backend.HandoffOffer, From: "a_1", To: "b", Token: 7}, true, "offered to b"},
		{"accept", backend.Handoff{Phase: backend.HandoffAccept, From: "a_1", To: "b_2", Token: 7}, true, "accepted by b_2"},
		{"transfer to the holder", backend.Handoff{Phase: backend.HandoffTransfer, From: "c_3", To: "a_1", Token: 7}, true, "transferred to a_1"},
		{"offer of an earlier term", backend.Handoff{Phase: backend.HandoffOffer, From: "a_1", Token: 6}, false, "-"},
		{"offer of another leader", backend.Handoff{Phase: backend.HandoffOffer, From: "z_9", Token: 7}, false, "-"},
		{"transfer to another", backend.Handoff{Phase: backend.HandoffTransfer, From: "a_1", To: "b_2", Token: 7}, false, "-"},
		{"release left to the replacement", backend.Handoff{Phase: backend.HandoffReserve, From: "web-2_1", To: "web-2", Token: 7, Wait: time.Minute}, true, "left to web-2 or another revision"},
		{"reserve of an earlier term", backend.Handoff{Phase: backend.HandoffReserve, From: "web-2_1", To: "web-2", Token: 6, Wait: time.Minute}, false, "-"},
	} {
		e := heldAt("e", "a_1", 7, time.Minute, time.Second)
		if c.h.Phase == backend.HandoffReserve {
			e.Record.HolderIdentity = "" // a release carries it
		}
		e.Record.Handoff = c.h
		r := RowOf(e, observed)
		if r.Handoff == nil || r.Handoff.Pending != c.pending || r.Handoff.Phase != string(c.h.Phase) {
			t.Errorf("%s: %+v, want pending %v", c.name, r.Handoff, c.pending)
		}
		if got := handoffCell(r.Handoff, false); got != c.cell {
			t.Errorf("%s: cell %q, want %q", c.name, got, c.cell)
		}
		if wide := handoffCell(r.Handoff, true); !strings.HasPrefix(wide, string(c.h.Phase)+":from="+c.h.From) || strings.Contains(wide, "leftover") == c.pending {
			t.Errorf("%s: wide cell %q", c.name, wide)
		}
	}
	if r := RowOf(heldAt("e", "a_1", 7, time.Minute, time.Second), observed); r.Handoff != nil || handoffCell(r.Handoff, true) != "-" {
		t.Errorf("no marker: %+v", r.Handoff)
	}
}
