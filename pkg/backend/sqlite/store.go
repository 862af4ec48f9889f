package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

const (
	selectRecord = `SELECT version, holder, lease_duration_seconds, acquire_time_us,
	renew_time_us, transitions, handoff, group_mark FROM leader_records WHERE name = ?`
	// selectRecords reads every election's row, in selectRecord's columns
	// after the name (watch.go).
	selectRecords = `SELECT name, version, holder, lease_duration_seconds,
	acquire_time_us, renew_time_us, transitions, handoff, group_mark FROM leader_records`
	selectVersion = `SELECT version FROM leader_records WHERE name = ?`
	insertRecord  = `INSERT INTO leader_records (name, version, holder,
	lease_duration_seconds, acquire_time_us, renew_time_us, transitions, handoff, group_mark)
	VALUES (:name, :version, :holder, :duration, :acquire, :renew, :transitions, :handoff, :group_mark)`
	updateRecord = `UPDATE leader_records SET version = :version, holder = :holder,
	lease_duration_seconds = :duration, acquire_time_us = :acquire,
	renew_time_us = :renew, transitions = :transitions, handoff = :handoff,
	group_mark = :group_mark WHERE name = :name`
)

// Get implements backend.Backend. Bad stored data never panics: NULL
// columns read as zero values, a lease duration outside int32 is clamped,
// a hand-off marker or group mark that does not parse reads as none
// (backend.DecodeHandoff, backend.DecodeGroupMark), and a value of the wrong type is an error
// naming its column.
//
// After reading, Get checks that the path still names the file it read
// (one stat); if not, it fails with backend.ErrStoreLost whatever it read.
func (b *Backend) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	if err := b.lossError(); err != nil {
		return backend.Record{}, "", b.fail("get", err)
	}
	rec, v, err := b.read(ctx)
	if lost := b.checkFile(); lost != nil {
		return backend.Record{}, "", b.fail("get", lost)
	}
	return rec, v, err
}

// read is Get without the check of the file.
func (b *Backend) read(ctx context.Context) (backend.Record, backend.Version, error) {
	rows, err := b.db.QueryContext(ctx, selectRecord, b.election)
	if err != nil {
		return backend.Record{}, "", b.fail("get", err)
	}
	defer func() { _ = rows.Close() }()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return backend.Record{}, "", b.fail("get", err)
		}
		_ = rows.Close() // ends the read before the next one on this pool
		return backend.Record{}, "", b.notFound(ctx)
	}
	var (
		version, duration, transitions, acquire, renew sql.NullInt64
		holder, handoff, mark                          sql.NullString
	)
	if err := rows.Scan(&version, &holder, &duration, &acquire, &renew, &transitions, &handoff, &mark); err != nil {
		return backend.Record{}, "", fmt.Errorf("sqlite: get %q: stored record in %s is malformed: %w",
			b.election, b.path, err)
	}
	rec := backend.Record{
		HolderIdentity:       holder.String,
		LeaseDurationSeconds: clampInt32(duration.Int64),
		AcquireTime:          fromMicros(acquire),
		RenewTime:            fromMicros(renew),
		Transitions:          transitions.Int64,
		Handoff:              backend.DecodeHandoff(handoff.String),
		Group:                backend.DecodeGroupMark(mark.String),
	}
	return rec, formatVersion(version.Int64), nil
}

// notFound is Get's error for an absent record: ErrNotFound, and also
// ErrNeverCreated when rows were never deletable in this file (schema.go),
// so the election never had one.
func (b *Backend) notFound(ctx context.Context) error {
	var never bool
	if err := b.db.QueryRowContext(ctx, selectNeverCreated).Scan(&never); err != nil {
		return b.fail("get", err)
	}
	if never {
		return fmt.Errorf("sqlite: get %q: %w (%w)", b.election, backend.ErrNotFound, backend.ErrNeverCreated)
	}
	return fmt.Errorf("sqlite: get %q: %w", b.election, backend.ErrNotFound)
}

// Create implements backend.Backend.
func (b *Backend) Create(ctx context.Context, rec backend.Record) (backend.Version, error) {
	return b.write(ctx, "create", insertRecord, rec, func(_ *sql.Tx, stored backend.Version, found bool) error {
		if found {
			return fmt.Errorf("stored version %s: %w", stored, backend.ErrAlreadyExists)
		}
		return nil
	})
}

// CreateFirst implements backend.FirstCreator: Create, refused unless, in
// the same write transaction, rows were never deletable in this file (the
// proof Get's ErrNeverCreated gives) and both triggers that keep them are
// still there, so no record of the election can ever have existed.
func (b *Backend) CreateFirst(ctx context.Context, rec backend.Record) (backend.Version, error) {
	return b.write(ctx, "create", insertRecord, rec, func(tx *sql.Tx, stored backend.Version, found bool) error {
		if found {
			return fmt.Errorf("stored version %s: %w", stored, backend.ErrAlreadyExists)
		}
		var never bool
		var triggers int
		if err := tx.QueryRowContext(ctx, selectNeverCreated).Scan(&never); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, countKeptTriggers).Scan(&triggers); err != nil {
			return err
		}
		if !never || triggers != 2 {
			return fmt.Errorf("as the first record: a record may have existed and been removed: %w", backend.ErrAlreadyExists)
		}
		return nil
	})
}

// Update implements backend.Backend: a compare-and-swap on prev, checked
// and written under SQLite's write lock.
func (b *Backend) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	return b.write(ctx, "update", updateRecord, rec, func(_ *sql.Tx, stored backend.Version, found bool) error {
		switch {
		case !found:
			return backend.ErrNotFound
		case stored != prev:
			return fmt.Errorf("from version %s (stored %s): %w", prev, stored, backend.ErrConflict)
		}
		return nil
	})
}

// beforeCommit, when set (by tests), sees each write's transaction just
// before it commits.
var beforeCommit func(*sql.Tx)

// write runs one BEGIN IMMEDIATE transaction, in its turn among the
// process's writers on the file (writeTurn): it checks that the path
// still names the file open (one stat, under the write lock, before
// anything is read or written), reads the stored version, lets check refuse
// the write, then runs stmt (insertRecord or
// updateRecord) with rec and a new version, and commits (synchronous=FULL,
// or NORMAL for a release: writerFor).
func (b *Backend) write(ctx context.Context, op, stmt string, rec backend.Record,
	check func(tx *sql.Tx, stored backend.Version, found bool) error,
) (backend.Version, error) {
	if err := b.lossError(); err != nil {
		return "", b.fail(op, err)
	}
	if err := backend.CheckRecord(rec); err != nil {
		return "", fmt.Errorf("sqlite: %s %q: %w", op, b.election, err)
	}
	acquire, err := toMicros(rec.AcquireTime)
	if err != nil {
		return "", fmt.Errorf("sqlite: %s %q: acquire time: %w", op, b.election, err)
	}
	renew, err := toMicros(rec.RenewTime)
	if err != nil {
		return "", fmt.Errorf("sqlite: %s %q: renew time: %w", op, b.election, err)
	}

	done, err := b.shared.writeTurn(ctx, b.busyTimeout)
	if err != nil {
		return "", b.fail(op, err)
	}
	defer done()
	tx, err := b.writerFor(rec).BeginTx(ctx, nil) // BEGIN IMMEDIATE, from the DSN
	if err != nil {
		return "", b.fail(op, err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := b.checkFile(); err != nil {
		return "", b.fail(op, err)
	}
	var stored sql.NullInt64
	err = tx.QueryRowContext(ctx, selectVersion, b.election).Scan(&stored)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", b.fail(op, err)
	}
	if err := check(tx, formatVersion(stored.Int64), found); err != nil {
		return "", b.fail(op, err)
	}
	var version int64
	if err := tx.QueryRowContext(ctx, nextVersion).Scan(&version); err != nil {
		return "", b.fail(op, err)
	}
	if _, err := tx.ExecContext(ctx, stmt,
		sql.Named("name", b.election),
		sql.Named("version", version),
		sql.Named("holder", rec.HolderIdentity),
		sql.Named("duration", rec.LeaseDurationSeconds),
		sql.Named("acquire", acquire),
		sql.Named("renew", renew),
		sql.Named("transitions", rec.Transitions),
		sql.Named("handoff", backend.EncodeHandoff(rec.Handoff)),
		sql.Named("group_mark", backend.EncodeGroupMark(rec.Group)),
	); err != nil {
		return "", b.fail(op, err)
	}
	if beforeCommit != nil {
		beforeCommit(tx)
	}
	if err := tx.Commit(); err != nil {
		return "", b.fail(op, err)
	}
	return formatVersion(version), nil
}

func formatVersion(v int64) backend.Version {
	return backend.Version(strconv.FormatInt(v, 10))
}

// The instants whose Unix microseconds fit in an int64.
var (
	minTime = time.UnixMicro(math.MinInt64)
	maxTime = time.UnixMicro(math.MaxInt64)
)

// toMicros is what a time column stores: NULL for the zero time, else Unix
// microseconds (truncated to backend.TimePrecision).
func toMicros(t time.Time) (sql.NullInt64, error) {
	if t.IsZero() {
		return sql.NullInt64{}, nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		return sql.NullInt64{}, fmt.Errorf("%v is outside the range stored (Unix microseconds in an int64)", t)
	}
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: true}, nil
}

// fromMicros reverses toMicros; times come back in UTC.
func fromMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

func clampInt32(v int64) int32 {
	return int32(max(math.MinInt32, min(math.MaxInt32, v)))
}
