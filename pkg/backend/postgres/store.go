package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// columns are the record's columns after the name, in the order scan
// reads them.
const columns = `version, holder, lease_duration_seconds, acquire_time, renew_time,
	transitions, handoff, group_mark`

// Get implements backend.Backend. Bad stored data never panics: NULL
// columns read as zero values, and a hand-off marker or group mark that
// does not parse reads as none (backend.DecodeHandoff,
// backend.DecodeGroupMark).
func (b *Backend) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	row := b.pool.QueryRow(ctx, `SELECT `+columns+` FROM `+b.table+` WHERE name = $1`, b.opts.Election)
	rec, v, err := scan(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return backend.Record{}, "", b.fail("get", backend.ErrNotFound)
	}
	if err != nil {
		return backend.Record{}, "", b.fail("get", err)
	}
	return rec, v, nil
}

// scan reads one row of columns.
func scan(row pgx.Row, before ...any) (backend.Record, backend.Version, error) {
	var (
		version, transitions  *int64
		duration              *int32
		holder, handoff, mark *string
		acquire, renew        *time.Time
	)
	dest := append(before, &version, &holder, &duration, &acquire, &renew, &transitions, &handoff, &mark)
	if err := row.Scan(dest...); err != nil {
		return backend.Record{}, "", err
	}
	rec := backend.Record{
		HolderIdentity:       deref(holder),
		LeaseDurationSeconds: deref(duration),
		AcquireTime:          utc(acquire),
		RenewTime:            utc(renew),
		Transitions:          deref(transitions),
		Handoff:              backend.DecodeHandoff(deref(handoff)),
		Group:                backend.DecodeGroupMark(deref(mark)),
	}
	return rec, formatVersion(deref(version)), nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// timeArg is what a time column stores: NULL for the zero time, else the
// instant (PostgreSQL keeps microseconds, backend.TimePrecision).
func timeArg(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.Truncate(backend.TimePrecision)
	return &t
}

// Create implements backend.Backend: an INSERT that does nothing when the
// name is taken.
func (b *Backend) Create(ctx context.Context, rec backend.Record) (backend.Version, error) {
	if err := backend.CheckRecord(rec); err != nil {
		return "", b.fail("create", err)
	}
	var version int64
	err := b.pool.QueryRow(ctx, `INSERT INTO `+b.table+` (name, holder, lease_duration_seconds,
	acquire_time, renew_time, transitions, handoff, group_mark)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (name) DO NOTHING RETURNING version`,
		append([]any{b.opts.Election}, recordArgs(rec)...)...).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", b.fail("create", backend.ErrAlreadyExists)
	}
	if err != nil {
		return "", b.fail("create", err)
	}
	return formatVersion(version), nil
}

// Update implements backend.Backend: an UPDATE whose WHERE clause is the
// compare-and-swap. Of racing writers from one version, PostgreSQL lets
// the first to commit change the row and re-checks the others' WHERE
// against the row it wrote, so they change nothing.
func (b *Backend) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	if err := backend.CheckRecord(rec); err != nil {
		return "", b.fail("update", err)
	}
	from, err := strconv.ParseInt(string(prev), 10, 64)
	if err != nil {
		from = -1 // a version never issued matches no row
	}
	var version int64
	err = b.pool.QueryRow(ctx, `UPDATE `+b.table+` SET version = DEFAULT, holder = $3,
	lease_duration_seconds = $4, acquire_time = $5, renew_time = $6, transitions = $7,
	handoff = $8, group_mark = $9 WHERE name = $1 AND version = $2 RETURNING version`,
		append([]any{b.opts.Election, from}, recordArgs(rec)...)...).Scan(&version)
	if err == nil {
		return formatVersion(version), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", b.fail("update", err)
	}
	var stored int64
	err = b.pool.QueryRow(ctx, `SELECT version FROM `+b.table+` WHERE name = $1`, b.opts.Election).Scan(&stored)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", b.fail("update", backend.ErrNotFound)
	case err != nil:
		return "", b.fail("update", err)
	}
	return "", b.fail("update", fmt.Errorf("from version %s (stored %d): %w", prev, stored, backend.ErrConflict))
}

// recordArgs are rec's values in the order of the columns after the name
// and version.
func recordArgs(rec backend.Record) []any {
	return []any{
		rec.HolderIdentity, rec.LeaseDurationSeconds, timeArg(rec.AcquireTime), timeArg(rec.RenewTime),
		rec.Transitions, backend.EncodeHandoff(rec.Handoff), backend.EncodeGroupMark(rec.Group),
	}
}

func formatVersion(v int64) backend.Version {
	return backend.Version(strconv.FormatInt(v, 10))
}
