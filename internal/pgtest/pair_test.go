package pgtest_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/pgtest"
)

// startPair starts a pair for one test and stops it at the end.
func startPair(t *testing.T, mode pgtest.Replication) *pgtest.Pair {
	t.Helper()
	began := time.Now()
	p, err := pgtest.StartPair(mode)
	if err != nil {
		t.Fatalf("starting a %v pair: %v", mode, err)
	}
	t.Logf("%v pair up in %v", mode, time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping the pair: %v", err)
		}
	})
	return p
}

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// insert commits a row with synchronous_commit on in its transaction,
// within d.
func insert(t *testing.T, db *sql.DB, n int, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SET LOCAL synchronous_commit = on`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO rows VALUES ($1)`, n); err != nil {
		return err
	}
	return tx.Commit()
}

func rowsOn(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM rows`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A synchronous pair: with the standby cut off, a commit that asks for
// the standby (synchronous_commit on) is not acknowledged; once the standby
// is back it is, and after the primary crashes and the standby is
// promoted, the row is there. The client's DSN reaches the promoted
// standby.
func TestSynchronousPairKeepsAcknowledgedCommits(t *testing.T) {
	p := startPair(t, pgtest.Synchronous)
	primary := open(t, p.Primary.DSN)
	if _, err := primary.ExecContext(t.Context(), `CREATE TABLE rows (n int)`); err != nil {
		t.Fatal(err)
	}
	if err := insert(t, primary, 1, 10*time.Second); err != nil {
		t.Fatalf("a commit with the standby streaming: %v", err)
	}
	if err := p.CutStandby(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := insert(t, primary, 2, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a synchronous commit with the standby cut off: %v, want no answer within 1s", err)
	}
	if err := p.ReconnectStandby(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := insert(t, primary, 3, 10*time.Second); err != nil {
		t.Fatalf("a commit with the standby back: %v", err)
	}
	if err := p.CrashPrimary(); err != nil {
		t.Fatal(err)
	}
	if err := p.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The commit whose answer was lost waited for the standby, and landed
	// when it came back: 3 rows.
	if got := rowsOn(t, open(t, p.DSN())); got != 3 {
		t.Fatalf("after the promotion: %d rows, want 3", got)
	}
}

// An asynchronous pair: with the standby cut off a commit is acknowledged
// at once, and the promoted standby lacks it.
func TestAsynchronousPairLosesCommitsTheStandbyLacks(t *testing.T) {
	p := startPair(t, pgtest.Asynchronous)
	primary := open(t, p.Primary.DSN)
	if _, err := primary.ExecContext(t.Context(), `CREATE TABLE rows (n int)`); err != nil {
		t.Fatal(err)
	}
	if err := p.AwaitReplayed(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.CutStandby(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := insert(t, primary, 1, 10*time.Second); err != nil {
		t.Fatalf("an asynchronous commit with the standby cut off: %v", err)
	}
	if err := p.CrashPrimary(); err != nil {
		t.Fatal(err)
	}
	if err := p.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := rowsOn(t, open(t, p.DSN())); got != 0 {
		t.Fatalf("after the promotion: %d rows, want 0 (the standby never received the commit)", got)
	}
}

// Pausing the standby's replay does not make it lack a commit: the WAL
// still streams, and a promotion ends the pause and replays it all. That
// is why the failover tests cut the standby off instead.
func TestPausedReplayStillHasTheCommitAfterPromotion(t *testing.T) {
	p := startPair(t, pgtest.Asynchronous)
	primary := open(t, p.Primary.DSN)
	if _, err := primary.ExecContext(t.Context(), `CREATE TABLE rows (n int)`); err != nil {
		t.Fatal(err)
	}
	if err := p.AwaitReplayed(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := open(t, p.Standby.DSN).ExecContext(t.Context(), `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	if err := insert(t, primary, 1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var lsn string
	if err := primary.QueryRowContext(t.Context(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	standby := open(t, p.Standby.DSN)
	for received := false; !received; {
		if err := standby.QueryRowContext(t.Context(), `SELECT pg_last_wal_receive_lsn() >= $1::pg_lsn`, lsn).Scan(&received); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var replayed int
	if err := standby.QueryRowContext(t.Context(), `SELECT count(*) FROM rows`).Scan(&replayed); err != nil || replayed != 0 {
		t.Fatalf("the paused standby shows %d rows (%v), want 0: replay is not paused", replayed, err)
	}
	if err := p.CrashPrimary(); err != nil {
		t.Fatal(err)
	}
	if err := p.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := rowsOn(t, open(t, p.DSN())); got != 1 {
		t.Fatalf("after the promotion: %d rows, want 1", got)
	}
}
