package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The schema. Both statements are no-ops on a file that already has it.
const (
	createRecords = `CREATE TABLE IF NOT EXISTS leader_records (
	name                   TEXT PRIMARY KEY,
	version                INTEGER NOT NULL,
	holder                 TEXT NOT NULL,
	lease_duration_seconds INTEGER NOT NULL,
	acquire_time_us        INTEGER,
	renew_time_us          INTEGER,
	transitions            INTEGER NOT NULL,
	handoff                TEXT NOT NULL DEFAULT '',
	group_mark             TEXT NOT NULL DEFAULT ''
)`
	// addHandoff brings a file made before planned hand-offs up to date.
	// Existing rows read as carrying no marker; a process of an older
	// release keeps working on the file (it names its columns and leaves
	// this one as it finds it).
	addHandoff = `ALTER TABLE leader_records ADD COLUMN handoff TEXT NOT NULL DEFAULT ''`
	hasHandoff = `SELECT count(*) FROM pragma_table_info('leader_records') WHERE name = 'handoff'`
	// addGroupMark brings a file made before shard groups marked their
	// records up to date, as addHandoff does.
	addGroupMark = `ALTER TABLE leader_records ADD COLUMN group_mark TEXT NOT NULL DEFAULT ''`
	hasGroupMark = `SELECT count(*) FROM pragma_table_info('leader_records') WHERE name = 'group_mark'`
	// leader_versions has one row (id 1) whose value is the last version
	// issued in this file, for any election.
	createVersions = `CREATE TABLE IF NOT EXISTS leader_versions (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	last INTEGER NOT NULL
)`
)

// Records are never deleted: a candidate that finds no record may take it
// at once only when no holder of an earlier one can exist (see
// backend.ErrNeverCreated), and a row removed by hand under a running
// leader would let a second one lead beside it. The triggers refuse a
// DELETE, and an UPDATE that renames a row away, with a message that says
// how to reset an election instead. An older release never deletes, so it
// keeps working on a file that has them.
const (
	keptMessage = `leader-sidecar: the record of an election is never deleted (a holder may still run); ` +
		`to reset an election, run: sidecar reset --sqlite-path <this file> --lease-name <name>`
	createKeptOnDelete = `CREATE TRIGGER IF NOT EXISTS leader_records_kept_on_delete
	BEFORE DELETE ON leader_records
	BEGIN SELECT RAISE(ABORT, '` + keptMessage + `'); END`
	createKeptOnRename = `CREATE TRIGGER IF NOT EXISTS leader_records_kept_on_rename
	BEFORE UPDATE OF name ON leader_records WHEN OLD.name IS NOT NEW.name
	BEGIN SELECT RAISE(ABORT, '` + keptMessage + `'); END`
	countKeptTriggers = `SELECT count(*) FROM sqlite_master WHERE type = 'trigger'
	AND name IN ('leader_records_kept_on_delete', 'leader_records_kept_on_rename')`
	// leader_deletes_refused has one row (id 1): since is the last version
	// issued in the file when the triggers were installed. 0 means rows
	// were never deletable in this file, so an election without a row never
	// had one (neverCreated). Installing the triggers again (they were
	// dropped, or the table with them) raises it to the current version.
	createDeletesRefused = `CREATE TABLE IF NOT EXISTS leader_deletes_refused (
	id    INTEGER PRIMARY KEY CHECK (id = 1),
	since INTEGER NOT NULL
)`
	noteDeletesRefused = `INSERT INTO leader_deletes_refused (id, since)
	SELECT 1, coalesce((SELECT last FROM leader_versions WHERE id = 1), (SELECT max(version) FROM leader_records), 0)
	WHERE true
	ON CONFLICT (id) DO UPDATE SET since = max(since, excluded.since)`
	// selectNeverCreated is 1 when an election without a row provably
	// never had one.
	selectNeverCreated = `SELECT coalesce((SELECT since = 0 FROM leader_deletes_refused WHERE id = 1), 0)`
)

// probeWrite starts writing without changing anything. BEGIN IMMEDIATE on
// a file SQLite could only open read-only quietly begins a read
// transaction instead, and CREATE TABLE IF NOT EXISTS writes nothing when
// the tables exist, so without it a read-only file would pass Open.
const probeWrite = `UPDATE leader_versions SET last = last WHERE id = 0`

// nextVersion takes the next version inside the caller's write transaction.
// If the counter row is missing (a new file, or an operator removed it) it
// starts above every version still stored, so it never goes backwards.
const nextVersion = `INSERT INTO leader_versions (id, last)
	SELECT 1, coalesce(max(version), 0) + 1 FROM leader_records WHERE true
	ON CONFLICT (id) DO UPDATE SET last = last + 1
	RETURNING last`

// initSchema checks that the file is in WAL mode, then creates the tables
// if missing, adds the handoff and group_mark columns to a table made
// before them, and the
// triggers that keep records from being deleted to a file without them,
// inside a write transaction. Taking the write lock here also
// proves at Open that the file is a database this process can write: a
// read-only file, an unwritable directory, a file that is not a database and
// a lock held past the busy timeout all fail now, not on the first write.
// Concurrent Opens of a new file serialize on the lock; all but the first
// find the tables present.
func (b *Backend) initSchema(ctx context.Context) error {
	var mode string
	if err := b.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("database %s is in journal mode %q and could not be switched to WAL", b.path, mode)
	}

	tx, err := b.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: takes the write lock
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, stmt := range []string{createRecords, createVersions, createDeletesRefused, probeWrite} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	var kept int
	if err := tx.QueryRowContext(ctx, countKeptTriggers).Scan(&kept); err != nil {
		return err
	}
	if kept < 2 {
		for _, stmt := range []string{noteDeletesRefused, createKeptOnDelete, createKeptOnRename} {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("adding the rule that records are never deleted: %w", err)
			}
		}
	}
	var columns int
	if err := tx.QueryRowContext(ctx, hasHandoff).Scan(&columns); err != nil {
		return err
	}
	if columns == 0 {
		if _, err := tx.ExecContext(ctx, addHandoff); err != nil {
			return fmt.Errorf("adding the handoff column: %w", err)
		}
	}
	if err := tx.QueryRowContext(ctx, hasGroupMark).Scan(&columns); err != nil {
		return err
	}
	if columns == 0 {
		if _, err := tx.ExecContext(ctx, addGroupMark); err != nil {
			return fmt.Errorf("adding the group_mark column: %w", err)
		}
	}
	return tx.Commit()
}

// initSchemaPatiently runs initSchema, retrying while SQLite answers
// SQLITE_BUSY, until the busy timeout has passed. SQLite's busy handler
// does not cover every wait at open: when several processes open a new file
// at once, switching it to WAL or recovering the WAL index can answer
// SQLITE_BUSY at once instead of waiting.
func (b *Backend) initSchemaPatiently(ctx context.Context) error {
	deadline := time.Now().Add(b.busyTimeout)
	for {
		err := b.initSchema(ctx)
		if err == nil || !isBusy(err) || !time.Now().Before(deadline) {
			return err
		}
		pause := time.Duration(5+rand.IntN(20)) * time.Millisecond
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

func isBusy(err error) bool {
	var se *modernc.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff
	return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
}
