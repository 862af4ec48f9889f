package statusview

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// operationsPage shows the table of kubectl leader status.
const operationsPage = "../../docs/operations.md"

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

// The table: a header and a row per election, columns aligned; a released
// record shows no renewal and no lease (what a release writes is not a
// holder's); -A adds the namespace first, wide adds the times and the
// version.
func TestTable(t *testing.T) {
	rows := []Row{
		RowOf(heldAt("billing", "billing-0_x", 12, 3*time.Minute+12*time.Second, 2*time.Second), observed),
		RowOf(heldAt("cron", "", 3, time.Hour, time.Hour), observed),
	}
	var b bytes.Buffer
	if err := (Table{}).Print(&b, rows, true); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME      HOLDER        TOKEN   TERM    RENEWED    LEASE   HANDOFF   STATE\n" +
		"billing   billing-0_x   12      3m12s   2.0s ago   15s     -         held\n" +
		"cron      <none>        3       -       -          -       -         released\n"
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := (Table{Wide: true, Namespaces: true}).Print(&b, rows[:1], true); err != nil {
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

// The example on the page is the table status prints: its header, and
// rows rendered from such elections line for line.
func TestStatusDocExample(t *testing.T) {
	page, err := os.ReadFile(operationsPage)
	if err != nil {
		t.Fatal(err)
	}
	_, example, found := strings.Cut(string(page), "$ kubectl leader status -n shop\n")
	example, _, _ = strings.Cut(example, "\nstale: ")
	if !found {
		t.Fatalf("%s: no example of kubectl leader status", operationsPage)
	}
	billing := heldAt("billing", "billing-7d9f8c6b5-x2x7q_0b1e2d3c-4f5a-6b7c-8d9e-0f1a2b3c4d5e", 12, 3*time.Minute+12*time.Second, 2*time.Second)
	orders := heldAt("orders", "orders-5c4b7d9f8-k8m2p_9a8b7c6d-5e4f-4a2b-9c0d-9e8f7a6b5c4d", 7, 41*time.Minute+3*time.Second, 1200*time.Millisecond)
	orders.Record.Handoff = backend.Handoff{Phase: backend.HandoffOffer, From: orders.Record.HolderIdentity, Token: 7}
	reports := heldAt("reports", "reports-6f7a8b9c0-q4r5s_1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d", 3, 2*time.Hour+5*time.Minute, 64*time.Second)
	var rows []Row
	for _, e := range []Election{billing, orders, reports} {
		rows = append(rows, RowOf(e, observed))
	}
	var b bytes.Buffer
	if err := (Table{}).Print(&b, rows, true); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSuffix(b.String(), "\n"); got != example {
		t.Fatalf("%s shows:\n%s\nstatus prints:\n%s", operationsPage, example, got)
	}
}
