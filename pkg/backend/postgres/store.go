package postgres

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// columns are the record's columns after the name, in the order scan
// reads them; times as Unix microseconds, so their text form does not
// depend on the session's DateStyle or TimeZone.
const columns = `version, holder, lease_duration_seconds,
	(extract(epoch FROM acquire_time) * 1000000)::bigint,
	(extract(epoch FROM renew_time) * 1000000)::bigint,
	transitions, handoff, group_mark`

// fromMicros is a time parameter from Unix microseconds ($n::bigint),
// exact and NULL for NULL.
func fromMicros(n int) string {
	return fmt.Sprintf(`('epoch'::timestamptz + $%d::bigint * interval '1 microsecond')`, n)
}

// Get implements backend.Backend. Bad stored data never panics: NULL
// columns read as zero values, a lease duration outside int32 is clamped,
// and a hand-off marker or group mark that does not parse reads as none
// (backend.DecodeHandoff, backend.DecodeGroupMark).
func (b *Backend) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	rows, err := b.t.pool.query(ctx, `SELECT `+columns+` FROM `+b.t.table+` WHERE name = $1`, text(b.election))
	if err != nil {
		return backend.Record{}, "", b.fail("get", err)
	}
	if len(rows) == 0 {
		return backend.Record{}, "", b.fail("get", backend.ErrNotFound)
	}
	rec, v, err := scan(rows[0])
	if err != nil {
		return backend.Record{}, "", b.fail("get", err)
	}
	return rec, v, nil
}

// scan reads one row of columns (text form; nil is NULL).
func scan(row [][]byte) (backend.Record, backend.Version, error) {
	if len(row) != 8 {
		return backend.Record{}, "", fmt.Errorf("a row of %d columns, want 8", len(row))
	}
	var ints [5]int64
	for i, col := range []int{0, 2, 3, 4, 5} {
		if row[col] == nil {
			continue
		}
		n, err := strconv.ParseInt(string(row[col]), 10, 64)
		if err != nil {
			return backend.Record{}, "", fmt.Errorf("stored record is malformed: column %d: %w", col+1, err)
		}
		ints[i] = n
	}
	rec := backend.Record{
		HolderIdentity:       string(row[1]),
		LeaseDurationSeconds: int32(max(math.MinInt32, min(math.MaxInt32, ints[1]))),
		AcquireTime:          timeOf(row[3], ints[2]),
		RenewTime:            timeOf(row[4], ints[3]),
		Transitions:          ints[4],
		Handoff:              backend.DecodeHandoff(string(row[6])),
		Group:                backend.DecodeGroupMark(string(row[7])),
	}
	return rec, formatVersion(ints[0]), nil
}

// timeOf is the time of Unix microseconds us, zero for NULL.
func timeOf(raw []byte, us int64) time.Time {
	if raw == nil {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// The instants whose Unix microseconds fit in an int64.
var (
	minTime = time.UnixMicro(math.MinInt64)
	maxTime = time.UnixMicro(math.MaxInt64)
)

// micros is a time parameter: NULL for the zero time, else Unix
// microseconds (backend.TimePrecision).
func micros(t time.Time) ([]byte, error) {
	if t.IsZero() {
		return nil, nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		return nil, fmt.Errorf("%v is outside the range stored", t)
	}
	return text(strconv.FormatInt(t.UnixMicro(), 10)), nil
}

// Create implements backend.Backend: an INSERT that does nothing when the
// name is taken, committed durably (conns.write).
func (b *Backend) Create(ctx context.Context, rec backend.Record) (backend.Version, error) {
	args, err := recordArgs(rec)
	if err != nil {
		return "", b.fail("create", err)
	}
	rows, err := b.t.pool.write(ctx, `INSERT INTO `+b.t.table+` (name, holder, lease_duration_seconds,
	acquire_time, renew_time, transitions, handoff, group_mark)
	VALUES ($1, $2, $3, `+fromMicros(4)+`, `+fromMicros(5)+`, $6, $7, $8)
	ON CONFLICT (name) DO NOTHING RETURNING version`,
		append([][]byte{text(b.election)}, args...)...)
	if err != nil {
		return "", b.fail("create", err)
	}
	if len(rows) == 0 {
		return "", b.fail("create", backend.ErrAlreadyExists)
	}
	return backend.Version(rows[0][0]), nil
}

// Update implements backend.Backend: an UPDATE whose WHERE clause is the
// compare-and-swap, committed durably (conns.write). Of racing writers from one version, PostgreSQL lets
// the first to commit change the row and re-checks the others' WHERE
// against the row it wrote, so they change nothing.
func (b *Backend) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	args, err := recordArgs(rec)
	if err != nil {
		return "", b.fail("update", err)
	}
	from, err := strconv.ParseInt(string(prev), 10, 64)
	if err != nil {
		from = -1 // a version never issued matches no row
	}
	rows, err := b.t.pool.write(ctx, `UPDATE `+b.t.table+` SET version = DEFAULT, holder = $3,
	lease_duration_seconds = $4, acquire_time = `+fromMicros(5)+`, renew_time = `+fromMicros(6)+`,
	transitions = $7, handoff = $8, group_mark = $9 WHERE name = $1 AND version = $2 RETURNING version`,
		append([][]byte{text(b.election), text(strconv.FormatInt(from, 10))}, args...)...)
	if err != nil {
		return "", b.fail("update", err)
	}
	if len(rows) == 1 {
		return backend.Version(rows[0][0]), nil
	}
	rows, err = b.t.pool.query(ctx, `SELECT version FROM `+b.t.table+` WHERE name = $1`, text(b.election))
	switch {
	case err != nil:
		return "", b.fail("update", err)
	case len(rows) == 0:
		return "", b.fail("update", backend.ErrNotFound)
	}
	return "", b.fail("update", fmt.Errorf("from version %s (stored %s): %w", prev, rows[0][0], backend.ErrConflict))
}

// recordArgs are rec's values, checked, in the order of the columns after
// the name and version.
func recordArgs(rec backend.Record) ([][]byte, error) {
	if err := backend.CheckRecord(rec); err != nil {
		return nil, err
	}
	acquire, err := micros(rec.AcquireTime)
	if err != nil {
		return nil, fmt.Errorf("acquire time: %w", err)
	}
	renew, err := micros(rec.RenewTime)
	if err != nil {
		return nil, fmt.Errorf("renew time: %w", err)
	}
	return [][]byte{
		text(rec.HolderIdentity), text(strconv.FormatInt(int64(rec.LeaseDurationSeconds), 10)), acquire, renew,
		text(strconv.FormatInt(rec.Transitions, 10)),
		text(backend.EncodeHandoff(rec.Handoff)), text(backend.EncodeGroupMark(rec.Group)),
	}, nil
}

func formatVersion(v int64) backend.Version {
	return backend.Version(strconv.FormatInt(v, 10))
}
