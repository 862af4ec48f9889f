package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Replication is how a Pair's primary commits with respect to its standby.
type Replication int

const (
	// Asynchronous: the primary streams its WAL to the standby but never
	// waits for it (synchronous_standby_names empty).
	Asynchronous Replication = iota
	// Synchronous: the primary names the standby in
	// synchronous_standby_names, so a commit that asks for it
	// (synchronous_commit on or remote_apply) waits until the standby has
	// it. The servers' own default stays synchronous_commit = off, as on
	// every test server: only a session that asks waits.
	Synchronous
)

func (r Replication) String() string {
	if r == Synchronous {
		return "synchronous"
	}
	return "asynchronous"
}

// StandbyName is the standby's cluster_name, the application_name it
// streams under and the name synchronous_standby_names lists.
const StandbyName = "standby"

// Pair is a primary and a streaming standby made from it with
// pg_basebackup -R, each on a Unix socket of its own (no TCP).
type Pair struct {
	Primary, Standby *Server
	Mode             Replication
	// conninfo is the standby's primary_conninfo, kept while CutStandby
	// has emptied it.
	conninfo string
}

// StartPair starts a primary and its standby and waits until the standby
// streams. It fails when the binaries are missing, saying how to install
// them.
func StartPair(mode Replication) (*Pair, error) { return startPair(mode) }

// DSN reaches whichever of the two servers accepts writes, as user
// postgres and database postgres: both hosts with
// target_session_attrs=read-write, so a client follows a promotion.
func (p *Pair) DSN() string {
	return fmt.Sprintf("host=%s,%s port=5432,5432 user=postgres dbname=postgres sslmode=disable target_session_attrs=read-write connect_timeout=2",
		p.Primary.SocketDir, p.Standby.SocketDir)
}

// CrashPrimary stops the primary at once (an immediate shutdown: no
// checkpoint, no goodbye to the standby), as a crash of its machine would
// for the standby. It waits until the server has exited.
func (p *Pair) CrashPrimary() error { return p.Primary.crash() }

// Promote promotes the standby (pg_promote) and waits until it accepts
// writes.
func (p *Pair) Promote(ctx context.Context) error {
	var promoted bool
	if err := p.query(ctx, p.Standby, `SELECT pg_promote(true, 30)`, &promoted); err != nil {
		return fmt.Errorf("promoting the standby: %w", err)
	}
	if !promoted {
		return errors.New("promoting the standby: pg_promote returned false within 30s")
	}
	return nil
}

// AwaitReplayed waits until the standby has replayed everything the
// primary has written so far.
func (p *Pair) AwaitReplayed(ctx context.Context) error {
	var lsn string
	if err := p.query(ctx, p.Primary, `SELECT pg_current_wal_insert_lsn()::text`, &lsn); err != nil {
		return err
	}
	for {
		var done bool
		err := p.query(ctx, p.Standby, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, &done, lsn)
		if err == nil && done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the standby did not replay up to %s: %w (last: %v)", lsn, ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// CutStandby stops the standby receiving WAL (its primary_conninfo
// emptied and reloaded) and waits until the primary no longer streams to
// it: the standby then lacks every write from here on, as one that lags
// would, and a synchronous commit waits. ReconnectStandby undoes it.
func (p *Pair) CutStandby(ctx context.Context) error {
	if err := p.query(ctx, p.Standby, `SELECT current_setting('primary_conninfo')`, &p.conninfo); err != nil {
		return err
	}
	if err := p.setConninfo(ctx, ""); err != nil {
		return err
	}
	return p.awaitStreaming(false)
}

// ReconnectStandby puts back the primary_conninfo that CutStandby emptied
// and waits until the standby streams again.
func (p *Pair) ReconnectStandby(ctx context.Context) error {
	if err := p.setConninfo(ctx, p.conninfo); err != nil {
		return err
	}
	return p.awaitStreaming(true)
}

func (p *Pair) setConninfo(ctx context.Context, conninfo string) error {
	db, err := sql.Open("pgx", p.Standby.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `ALTER SYSTEM SET primary_conninfo = '`+strings.ReplaceAll(conninfo, `'`, `''`)+`'`); err != nil {
		return fmt.Errorf("setting the standby's primary_conninfo: %w", err)
	}
	if _, err := db.ExecContext(ctx, `SELECT pg_reload_conf()`); err != nil {
		return fmt.Errorf("reloading the standby's configuration: %w", err)
	}
	return nil
}

// awaitStreaming waits until the primary streams to the standby (want) or
// no longer does, as pg_stat_replication shows.
func (p *Pair) awaitStreaming(want bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var n int
		err := p.query(ctx, p.Primary, `SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'`, &n, StandbyName)
		cancel()
		if err == nil && (n > 0) == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the standby streaming = %v not within 30s (last: %d streaming, %v)", want, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// query runs a one-row, one-column query on s.
func (p *Pair) query(ctx context.Context, s *Server, q string, dest any, args ...any) error {
	db, err := sql.Open("pgx", s.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.QueryRowContext(ctx, q, args...).Scan(dest)
}

// Stop stops both servers and removes their directories.
func (p *Pair) Stop() error {
	return errors.Join(p.Standby.Stop(), p.Primary.Stop())
}
