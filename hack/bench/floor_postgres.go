package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// The floors on PostgreSQL are the work of a hand-off or a fail-over with
// nothing else: two connections (pgx, the driver the backend speaks
// through) in this process to the run's server, on a one-row table of
// their own whose trigger notifies after every write, as the backend's
// table does (pkg/backend/postgres: pg_notify from an AFTER INSERT OR
// UPDATE trigger, so the notification leaves with the commit). The
// writer's commits wait for the WAL flush (synchronous_commit=on), as
// every record write of the backend does whatever the server's default;
// the other connection LISTENs. A hand-off: the writer commits the
// release (a compare-and-swap of the version), the other receives the
// notification, reads the row and commits the acquire (a compare-and-swap
// from the version it read). A crash fail-over beyond the lease: the
// writer renews, the other receives the notification and reads the row
// (a standby counts the lease from the version it read), then, after a
// pause, takes the row with one compare-and-swap; the lease duration a
// real standby waits in between is left out, as it is of the sidecar's
// figure.
const (
	pgFloorChannel = "bench_floor"
	pgFloorSchema  = `DROP TABLE IF EXISTS bench_floor;
CREATE TABLE bench_floor (name TEXT PRIMARY KEY, version BIGINT NOT NULL, holder TEXT NOT NULL, renew_time TIMESTAMPTZ);
CREATE OR REPLACE FUNCTION bench_floor_notify() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	PERFORM pg_notify('` + pgFloorChannel + `', NEW.name);
	RETURN NULL;
END $fn$;
CREATE TRIGGER bench_floor_notify_on_write AFTER INSERT OR UPDATE ON bench_floor
	FOR EACH ROW EXECUTE FUNCTION bench_floor_notify();
INSERT INTO bench_floor VALUES ('e', 1, 'a', now())`
	pgFloorRelease = `UPDATE bench_floor SET version = version + 1, holder = '', renew_time = $2
	WHERE name = 'e' AND version = $1 RETURNING version`
	pgFloorRenew = `UPDATE bench_floor SET version = version + 1, holder = 'a', renew_time = $2
	WHERE name = 'e' AND version = $1 RETURNING version`
	pgFloorAcquire = `UPDATE bench_floor SET version = version + 1, holder = 'b', renew_time = $2
	WHERE name = 'e' AND version = $1 RETURNING version`
	pgFloorRead = `SELECT version, holder FROM bench_floor WHERE name = 'e'`
)

// pgFloor measures n floor trials on PostgreSQL: hand-offs, or with
// failover, the part of a crash fail-over beyond the lease.
func (b *bench) pgFloor(n int, failover bool) ([]trial, error) {
	ctx := context.Background()
	var conns [2]*pgx.Conn
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close(ctx)
			}
		}
	}()
	for i := range conns {
		c, err := pgx.Connect(ctx, b.pg.DSN)
		if err != nil {
			return nil, err
		}
		conns[i] = c
		if _, err := c.Exec(ctx, "SET synchronous_commit = on"); err != nil {
			return nil, err
		}
	}
	writer, standby := conns[0], conns[1]
	if _, err := writer.Exec(ctx, pgFloorSchema); err != nil {
		return nil, fmt.Errorf("the floor's table: %w", err)
	}
	if _, err := standby.Exec(ctx, "LISTEN "+pgFloorChannel); err != nil {
		return nil, err
	}
	f := &pgFloorPair{writer: writer, standby: standby, writerPID: writer.PgConn().PID(), version: 1}
	var out []trial
	for i := 0; i < n; i++ {
		<-floorPause()
		t, err := f.trial(failover)
		if err != nil {
			return out, err
		}
		out = append(out, t)
		b.logf("  floor postgres trial %d (failover %v): %v %s", i+1, failover, t.Latency.Round(time.Microsecond), stepsString(t.Steps))
	}
	return out, nil
}

// pgFloorPair is the floor's two connections and the row's version.
type pgFloorPair struct {
	writer, standby *pgx.Conn
	writerPID       uint32
	version         int64
}

// trial is one hand-off (the writer releases) or fail-over (the writer
// renews, and the standby takes over after a pause). The writer's commit
// runs beside the standby's wait, as in two processes.
func (f *pgFloorPair) trial(failover bool) (trial, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type commit struct {
		at  time.Time
		err error
	}
	committed := make(chan commit, 1)
	stmt, first, second, want := pgFloorRelease, "release committed", "release read", ""
	if failover {
		stmt, first, second, want = pgFloorRenew, "renewal committed", "renewal read", "a"
	}
	from := f.version
	t0 := time.Now() // the renewal's renew_time
	go func() {
		_, err := casRowPG(ctx, f.writer, stmt, from, t0)
		committed <- commit{time.Now(), err}
	}()
	if err := f.awaitWriter(ctx); err != nil {
		return trial{}, err
	}
	notified := time.Now()
	var holder string
	if err := f.standby.QueryRow(ctx, pgFloorRead).Scan(&f.version, &holder); err != nil {
		return trial{}, err
	}
	seen := time.Now()
	c := <-committed
	if c.err != nil {
		return trial{}, fmt.Errorf("the writer's %s: %w", first, c.err)
	}
	if holder != want {
		return trial{}, fmt.Errorf("after the notification the row names %q, want %q", holder, want)
	}
	if failover {
		<-floorPause() // a real standby waits out the lease duration here
	}
	casStart := time.Now()
	v, err := casRowPG(ctx, f.standby, pgFloorAcquire, f.version, casStart)
	if err != nil {
		return trial{}, fmt.Errorf("the standby's acquire: %w", err)
	}
	done := time.Now()
	f.version = v
	t := trial{Latency: done.Sub(t0), Steps: []step{{first, c.at.Sub(t0)}, {"notification received", notified.Sub(t0)},
		{second, seen.Sub(t0)}, {"acquire committed", done.Sub(t0)}}}
	if failover {
		t.Latency = seen.Sub(t0) + done.Sub(casStart)
		t.Beyond = t.Latency
		t.Steps[3] = step{"acquire committed (pause left out)", t.Latency}
	}
	// The notification can reach the standby before the writer has read
	// its commit's answer.
	slices.SortStableFunc(t.Steps, func(a, b step) int { return int(a.At - b.At) })
	return t, nil
}

// awaitWriter waits for a notification of the writer's, dropping those of
// the standby's own acquires.
func (f *pgFloorPair) awaitWriter(ctx context.Context) error {
	for {
		n, err := f.standby.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("waiting for the notification: %w", err)
		}
		if n != nil && n.PID == f.writerPID {
			return nil
		}
	}
}

// casRowPG runs stmt, a compare-and-swap from version v stamping renew,
// and returns the version it wrote.
func casRowPG(ctx context.Context, c *pgx.Conn, stmt string, v int64, renew time.Time) (int64, error) {
	var written int64
	if err := c.QueryRow(ctx, stmt, v, renew).Scan(&written); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("compare-and-swap from version %d wrote no row", v)
		}
		return 0, err
	}
	return written, nil
}
