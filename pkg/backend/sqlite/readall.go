package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	modernc "modernc.org/sqlite"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Stored is one election's record as ReadAll found it.
type Stored struct {
	// Election is the election's name (the row's key).
	Election string
	Record   backend.Record
	Version  backend.Version
}

// ReadAll reads the record of every election in the database at path, in
// one read transaction (a consistent snapshot), sorted by name, for
// commands that only look (sidecar status). Unlike Open it never creates
// the file, its tables or its triggers, never switches it to WAL mode and
// never takes the write lock: the connection is read-only (mode=ro). A
// file made before hand-off markers existed reads as carrying none. Bad
// stored data reads as Get reads it; a path that names no file, or a file
// that holds no election table, is an error naming the path.
func ReadAll(ctx context.Context, path string) ([]Stored, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: resolve path %q: %w", path, err)
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("sqlite: %s does not exist", abs)
	case err != nil:
		return nil, fmt.Errorf("sqlite: %w", err)
	case st.IsDir():
		return nil, fmt.Errorf("sqlite: %s is a directory, not a database file", abs)
	}
	connector, err := modernc.NewConnector(dsn(abs, DefaultBusyTimeout, readPool))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	db := sql.OpenDB(connector)
	defer func() { _ = db.Close() }()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	defer func() { _ = tx.Rollback() }()
	var tables int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'leader_records'`).Scan(&tables); err != nil {
		return nil, fmt.Errorf("sqlite: read %s: %w", abs, err)
	}
	if tables == 0 {
		return nil, fmt.Errorf("sqlite: %s holds no elections (no table leader_records): not a file the sidecar made", abs)
	}
	var handoffs int
	if err := tx.QueryRowContext(ctx, hasHandoff).Scan(&handoffs); err != nil {
		return nil, fmt.Errorf("sqlite: read %s: %w", abs, err)
	}
	handoff := "handoff"
	if handoffs == 0 {
		handoff = "''"
	}
	var marks int
	if err := tx.QueryRowContext(ctx, hasGroupMark).Scan(&marks); err != nil {
		return nil, fmt.Errorf("sqlite: read %s: %w", abs, err)
	}
	groupMark := "group_mark"
	if marks == 0 {
		groupMark = "''"
	}
	rows, err := tx.QueryContext(ctx, `SELECT name, version, holder, lease_duration_seconds, acquire_time_us,
	renew_time_us, transitions, `+handoff+`, `+groupMark+` FROM leader_records ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read %s: %w", abs, err)
	}
	defer func() { _ = rows.Close() }()
	var all []Stored
	for rows.Next() {
		var (
			name, holder, marker, mark                     sql.NullString
			version, duration, transitions, acquire, renew sql.NullInt64
		)
		if err := rows.Scan(&name, &version, &holder, &duration, &acquire, &renew, &transitions, &marker, &mark); err != nil {
			return nil, fmt.Errorf("sqlite: read %s: a stored record is malformed: %w", abs, err)
		}
		all = append(all, Stored{
			Election: name.String,
			Record: backend.Record{
				HolderIdentity:       holder.String,
				LeaseDurationSeconds: clampInt32(duration.Int64),
				AcquireTime:          fromMicros(acquire),
				RenewTime:            fromMicros(renew),
				Transitions:          transitions.Int64,
				Handoff:              backend.DecodeHandoff(marker.String),
				Group:                backend.DecodeGroupMark(mark.String),
			},
			Version: formatVersion(version.Int64),
		})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read %s: %w", abs, err)
	}
	return all, nil
}
