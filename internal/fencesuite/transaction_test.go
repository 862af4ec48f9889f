package fencesuite_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// The page's whole statement (docs/fencing.md, "The write and its check in
// one statement, beside the election"), run as it is written on PostgreSQL
// with the terms of two real sidecars that elect through the same
// database: an older term's statement started while a newer term's
// transaction is open waits for the guard row and is refused once it
// commits; after a hand-off the old term is refused and its invoice left
// unsent; the same UPDATE without its WITH part sends it (the baseline the
// guard is for).
func TestFencingDocTransactionBesideTheElection(t *testing.T) {
	db := openPostgres(t)
	ctx := t.Context()
	n := tables.Add(1)
	fenceTable, invoices, records := fmt.Sprintf("fence_tokens_t%d", n), fmt.Sprintf("invoices_t%d", n), fmt.Sprintf("leader_records_t%d", n)
	if _, err := db.ExecContext(ctx, ownTable(t, docBlock(t, "ddl", "postgres", "sql"), fenceTable)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+invoices+" (id INT PRIMARY KEY, sent_at TIMESTAMPTZ, sent_token BIGINT);"+
		" INSERT INTO "+invoices+" (id) SELECT generate_series(1, 6)"); err != nil {
		t.Fatal(err)
	}
	stmt := ownTable(t, docBlock(t, "transaction", "postgres", "sql"), fenceTable)
	if !strings.Contains(stmt, "UPDATE invoices ") || !strings.Contains(stmt, " AND EXISTS (SELECT FROM fence)") {
		t.Fatalf("the documented statement does not update invoices behind the guard:\n%s", stmt)
	}
	stmt = strings.Replace(stmt, "UPDATE invoices ", "UPDATE "+invoices+" ", 1)
	type execer interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	}
	send := func(q execer, statement string, term fence.TermID, invoice int) int64 {
		t.Helper()
		res, err := q.ExecContext(ctx, statement, term.Token, term.Holder, invoice)
		if err != nil {
			t.Fatalf("invoice %d with %v: %v", invoice, term, err)
		}
		rows, err := res.RowsAffected()
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	sentBy := func(invoice int) (token sql.NullInt64) {
		t.Helper()
		if err := db.QueryRowContext(ctx, "SELECT sent_token FROM "+invoices+" WHERE id = $1", invoice).Scan(&token); err != nil {
			t.Fatal(err)
		}
		return token
	}

	url := postgresDSN(t)
	all := make([]*sidecartest.Sidecar, 2)
	for i := range all {
		all[i] = sidecartest.Spawn(t, nil, "--backend", "postgres", "--postgres-url", url, "--postgres-table", records)
	}
	for _, s := range all {
		s.WaitServing()
	}
	a, token := sidecartest.AwaitSettledLeader(t, all, 10*time.Second)
	b := sidecartest.Without(all, a)[0]
	termA := fence.TermID{Token: token, Holder: sidecartest.IdentityOf(t, a)}
	if rows := send(db, stmt, termA, 1); rows != 1 {
		t.Fatalf("the leader's term sent %d invoices, want 1", rows)
	}

	a.Signal(syscall.SIGTERM)
	sidecartest.AwaitToken(t, []*sidecartest.Sidecar{b}, token+1, 3*sidecartest.LeaseDuration)
	termB := fence.TermID{Token: token + 1, Holder: sidecartest.IdentityOf(t, b)}

	// The new term's transaction is open when the old term's statement
	// starts: the old one must wait for the guard row, then see the new
	// token and send nothing.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if rows := send(tx, stmt, termB, 4); rows != 1 {
		t.Fatalf("the new term sent %d invoices in its transaction, want 1", rows)
	}
	stale := make(chan int64, 1)
	go func() {
		res, err := db.ExecContext(ctx, stmt, termA.Token, termA.Holder, 5)
		if err != nil {
			t.Errorf("the old term's statement: %v", err)
			stale <- -1
			return
		}
		rows, _ := res.RowsAffected()
		stale <- rows
	}()
	awaitLockWait(t, db, invoices)
	select {
	case rows := <-stale:
		t.Fatalf("the old term's statement returned (%d rows) while the new term's transaction held the guard row", rows)
	default:
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if rows := <-stale; rows != 0 {
		t.Fatalf("the old term's statement, once the new term committed, sent %d invoices, want 0", rows)
	}

	if rows := send(db, stmt, termB, 2); rows != 1 {
		t.Fatalf("the new term sent %d invoices, want 1", rows)
	}
	if rows := send(db, stmt, termA, 3); rows != 0 {
		t.Fatalf("the old term, after the hand-off, sent %d invoices, want 0", rows)
	}
	for invoice, want := range map[int]sql.NullInt64{1: {Int64: termA.Token, Valid: true}, 2: {Int64: termB.Token, Valid: true},
		3: {}, 4: {Int64: termB.Token, Valid: true}, 5: {}} {
		if got := sentBy(invoice); got != want {
			t.Errorf("invoice %d sent by token %v, want %v", invoice, got, want)
		}
	}
	var accepted fence.TermID
	if err := db.QueryRowContext(ctx, "SELECT token, holder FROM "+fenceTable+" WHERE resource = 'invoices'").Scan(&accepted.Token, &accepted.Holder); err != nil {
		t.Fatal(err)
	}
	if accepted != termB {
		t.Errorf("the guard recorded %v, want the new term %v", accepted, termB)
	}

	unguarded := strings.Replace(stmt, " AND EXISTS (SELECT FROM fence)", "", 1)
	if rows := send(db, unguarded, termA, 6); rows != 1 {
		t.Fatalf("without the guard the old term sent %d invoices, want 1 (the write the guard refuses)", rows)
	}
}

// awaitLockWait waits until a statement naming table waits for a lock in
// PostgreSQL, failing the test after 10 s.
func awaitLockWait(t *testing.T, db *sql.DB, table string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position($1 in query) > 0", table).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no statement on %s waited for a lock within 10 s", table)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
