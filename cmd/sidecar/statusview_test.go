package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// observed is the observer's clock in these tests.
var observed = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// heldAt is an election held by holder since acquired ago, last renewed
// renewed ago, with a 15s lease.
func heldAt(name, holder string, token int64, acquired, renewed time.Duration) storedElection {
	return storedElection{namespace: "shop", name: name, version: "42", rec: backend.Record{
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
	released.rec.AcquireTime = released.rec.RenewTime
	noRenewal := heldAt("n", "a_1", 1, time.Minute, 0)
	noRenewal.rec.RenewTime = time.Time{}
	for _, c := range []struct {
		name  string
		e     storedElection
		state string
	}{
		{"renewed 2s ago", heldAt("e", "a_1", 3, time.Hour, 2*time.Second), stateHeld},
		{"renewed exactly a lease ago", heldAt("e", "a_1", 3, time.Hour, 15*time.Second), stateHeld},
		{"renewed just over a lease ago", heldAt("e", "a_1", 3, time.Hour, 15*time.Second+time.Millisecond), stateStale},
		{"renewed in the future (holder's clock ahead)", heldAt("e", "a_1", 3, time.Hour, -5*time.Second), stateHeld},
		{"released", released, stateReleased},
		{"held, no renew time", noRenewal, stateStale},
		{"a shard group's member record", heldAt("shop-member-shop-0-x1", "shop-0_X1", 0, time.Hour, 2*time.Second), stateMember},
		{"a member record not renewed within its lease", heldAt("shop-member-shop-0-x1", "shop-0_X1", 0, time.Hour, time.Minute), stateStale},
		{"a shard's record", heldAt("shop-shard-3", "shop-0_X1", 2, time.Hour, 2*time.Second), stateHeld},
		{"a record named like a member of another holder", heldAt("shop-member-shop-0-x1", "shop-1_y", 1, time.Hour, 2*time.Second), stateHeld},
		{"a record named only after its holder", heldAt("-member-shop-0-x1", "shop-0_X1", 1, time.Hour, 2*time.Second), stateHeld},
	} {
		r := rowOf(c.e, observed)
		if r.State != c.state || r.Stale != (c.state == stateStale) {
			t.Errorf("%s: state %q stale %v, want %q", c.name, r.State, r.Stale, c.state)
		}
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
	} {
		e := heldAt("e", "a_1", 7, time.Minute, time.Second)
		e.rec.Handoff = c.h
		r := rowOf(e, observed)
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
	if r := rowOf(heldAt("e", "a_1", 7, time.Minute, time.Second), observed); r.Handoff != nil || handoffCell(r.Handoff, true) != "-" {
		t.Errorf("no marker: %+v", r.Handoff)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond:                "850ms",
		7250 * time.Millisecond:               "7.2s",
		45 * time.Second:                      "45s",
		3*time.Minute + 12*time.Second:        "3m12s",
		2*time.Hour + 5*time.Minute:           "2h5m",
		76 * time.Hour:                        "3d4h",
		-(2*time.Second + 1*time.Millisecond): "-2.0s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// The table: a header and a row per election, columns aligned; -A adds
// the namespace first, wide adds the times and the version.
func TestTable(t *testing.T) {
	rows := []electionRow{
		rowOf(heldAt("billing", "billing-0_x", 12, 3*time.Minute+12*time.Second, 2*time.Second), observed),
		rowOf(heldAt("cron", "", 3, time.Hour, time.Hour), observed),
	}
	var b bytes.Buffer
	if err := (tablePrinter{}).print(&b, rows, true); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME      HOLDER        TOKEN   TERM    RENEWED    LEASE   HANDOFF   STATE\n" +
		"billing   billing-0_x   12      3m12s   2.0s ago   15s     -         held\n" +
		"cron      <none>        3       -       1h0m ago   15s     -         released\n"
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := (tablePrinter{wide: true, namespaces: true}).print(&b, rows[:1], true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	header, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	wantHeader := "NAMESPACE NAME HOLDER TOKEN TERM RENEWED LEASE HANDOFF STATE ACQUIRE-TIME RENEW-TIME VERSION"
	if strings.Join(header, " ") != wantHeader {
		t.Fatalf("wide header %q, want %q", lines[0], wantHeader)
	}
	wantRow := "shop billing billing-0_x 12 3m12s 2.0s ago 15s - held 2026-12-02T11:56:48.000000Z 2026-12-02T11:59:58.000000Z 42"
	if strings.Join(row, " ") != wantRow {
		t.Fatalf("wide row %q, want %q", lines[1], wantRow)
	}
}

// -o json: every field under its name, times in RFC 3339, ages in seconds
// by the observer's clock, null where there is nothing.
func TestRowJSON(t *testing.T) {
	e := heldAt("billing", "billing-0_x", 12, 90*time.Second, 1500*time.Millisecond)
	e.rec.Handoff = backend.Handoff{Phase: backend.HandoffOffer, From: "billing-0_x", To: "billing-1", Token: 12}
	data, err := json.Marshal(statusList{Elections: []electionRow{rowOf(e, observed), rowOf(storedElection{name: "local", version: "1"}, observed)}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"elections":[` +
		`{"namespace":"shop","name":"billing","holder":"billing-0_x","token":12,` +
		`"acquireTime":"2026-12-02T11:58:30Z","renewTime":"2026-12-02T11:59:58.5Z","leaseDurationSeconds":15,` +
		`"termAgeSeconds":90,"sinceRenewalSeconds":1.5,` +
		`"handoff":{"phase":"offer","from":"billing-0_x","to":"billing-1","token":12,"pending":true},` +
		`"state":"held","stale":false,"version":"42","observedAt":"2026-12-02T12:00:00Z"},` +
		`{"name":"local","holder":"","token":0,"acquireTime":null,"renewTime":null,"leaseDurationSeconds":0,` +
		`"termAgeSeconds":null,"sinceRenewalSeconds":null,"handoff":null,"state":"released","stale":false,"version":"1",` +
		`"observedAt":"2026-12-02T12:00:00Z"}]}`
	if string(data) != want {
		t.Fatalf("json:\n%s\nwant:\n%s", data, want)
	}
}

// --watch prints a row when what an operator acts on changes (holder,
// token, hand-off, state), not on every renewal; a holder that stops
// renewing turns stale with time alone; a record that goes is printed as
// deleted.
func TestWatcherPrintsChanges(t *testing.T) {
	w := newStatusWatcher()
	a := heldAt("a", "a-0_x", 1, time.Minute, time.Second)
	b := heldAt("b", "b-0_x", 5, time.Minute, time.Second)
	names := func(rows []electionRow) string {
		var s []string
		for _, r := range rows {
			s = append(s, r.Name+":"+r.Holder+":"+r.State)
		}
		return strings.Join(s, " ")
	}
	if got := names(w.apply(statusUpdate{full: true, elections: []storedElection{b, a}}, observed)); got != "a:a-0_x:held b:b-0_x:held" {
		t.Fatalf("first list: %q", got)
	}
	renewed := a
	renewed.rec.RenewTime, renewed.version = observed, "43"
	if got := w.apply(statusUpdate{elections: []storedElection{renewed}}, observed); len(got) != 0 {
		t.Fatalf("a renewal printed %q", names(got))
	}
	moved := renewed
	moved.rec.HolderIdentity, moved.rec.Transitions = "a-1_y", 2
	if got := names(w.apply(statusUpdate{elections: []storedElection{moved}}, observed)); got != "a:a-1_y:held" {
		t.Fatalf("leadership moved: %q", got)
	}
	if got := w.recheck(observed.Add(10 * time.Second)); len(got) != 0 {
		t.Fatalf("within the lease: %q", names(got))
	}
	// a renewed at observed; b a second before it. 14.5s later b is stale, a not yet.
	if got := names(w.recheck(observed.Add(14*time.Second + 500*time.Millisecond))); got != "b:b-0_x:stale" {
		t.Fatalf("b stopped renewing: %q", got)
	}
	if got := names(w.apply(statusUpdate{gone: []storedElection{b}}, observed)); got != "b:b-0_x:deleted" {
		t.Fatalf("b deleted: %q", got)
	}
	if got := names(w.apply(statusUpdate{full: true, elections: nil}, observed)); got != "a:a-1_y:deleted" {
		t.Fatalf("a gone from a full list: %q", got)
	}
	if got := w.apply(statusUpdate{full: true}, observed); len(got) != 0 {
		t.Fatalf("nothing left, yet %q", names(got))
	}
}
