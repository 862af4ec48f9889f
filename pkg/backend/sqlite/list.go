package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

var _ backend.Lister = (*Backend)(nil)

// selectPrefixed reads every record whose name begins with the
// parameter, in one statement (one read transaction: a consistent
// snapshot), sorted by name.
const selectPrefixed = `SELECT name, version, holder, lease_duration_seconds, acquire_time_us,
	renew_time_us, transitions, handoff, group_mark FROM leader_records
	WHERE substr(name, 1, length(:prefix)) = :prefix ORDER BY name`

// List implements backend.Lister over every election in the file, not
// only the one this handle was opened on. Like Get, it fails with
// backend.ErrStoreLost once the path no longer names the file it opened.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Listed, error) {
	if err := b.lossError(); err != nil {
		return nil, b.fail("list", err)
	}
	all, err := b.list(ctx, prefix)
	if lost := b.checkFile(); lost != nil {
		return nil, b.fail("list", lost)
	}
	return all, err
}

func (b *Backend) list(ctx context.Context, prefix string) ([]backend.Listed, error) {
	rows, err := b.db.QueryContext(ctx, selectPrefixed, sql.Named("prefix", prefix))
	if err != nil {
		return nil, b.fail("list", err)
	}
	defer func() { _ = rows.Close() }()
	var all []backend.Listed
	for rows.Next() {
		var (
			name, holder, handoff, mark                    sql.NullString
			version, duration, transitions, acquire, renew sql.NullInt64
		)
		if err := rows.Scan(&name, &version, &holder, &duration, &acquire, &renew, &transitions, &handoff, &mark); err != nil {
			return nil, fmt.Errorf("sqlite: list %q: a stored record in %s is malformed: %w", prefix, b.path, err)
		}
		all = append(all, backend.Listed{
			Name: name.String,
			Record: backend.Record{
				HolderIdentity:       holder.String,
				LeaseDurationSeconds: clampInt32(duration.Int64),
				AcquireTime:          fromMicros(acquire),
				RenewTime:            fromMicros(renew),
				Transitions:          transitions.Int64,
				Handoff:              backend.DecodeHandoff(handoff.String),
				Group:                backend.DecodeGroupMark(mark.String),
			},
			Version: formatVersion(version.Int64),
		})
	}
	if err := rows.Err(); err != nil {
		return nil, b.fail("list", err)
	}
	return all, nil
}
