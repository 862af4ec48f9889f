package fence

import (
	"context"
	"database/sql"
	"fmt"
)

// Conn is what EnsureTable needs: *sql.DB, *sql.Conn and *sql.Tx have it.
type Conn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// EnsureTable creates the guard's table if it does not exist,
//
//	(resource TEXT PRIMARY KEY, token BIGINT NOT NULL CHECK (token >= 0),
//	 holder TEXT NOT NULL DEFAULT '')
//
// and adds the holder column to a table created by a version of this
// package that stored tokens only:
//
//	ALTER TABLE fence_tokens ADD COLUMN holder TEXT NOT NULL DEFAULT ''
//
// Rows it keeps have an empty holder, which binds to the first holder that
// presents the row's token (see SQLGuard). Run it at start-up or in a
// migration, before the first Check; through a *sql.DB, a *sql.Conn or
// inside a *sql.Tx. Replicas may run it at once. A role that may not alter
// the table can have it migrated by one that may, with the statement above.
func (g *SQLGuard) EnsureTable(ctx context.Context, db Conn) error {
	if _, err := db.ExecContext(ctx, g.create); err != nil {
		return fmt.Errorf("fence: creating table %s: %w", g.table, err)
	}
	has, err := g.hasHolder(ctx, db)
	if err != nil || has {
		return err
	}
	if _, err := db.ExecContext(ctx, g.migrate); err != nil {
		// Another replica may have added it meanwhile; if not, say why not.
		if has, again := g.hasHolder(ctx, db); again != nil || !has {
			return fmt.Errorf("fence: table %s has no holder column (made by an earlier version); adding it: %w", g.table, err)
		}
	}
	return nil
}

// hasHolder reports whether the guard's table has the holder column.
//
// The probe must not fail when the column is missing (on PostgreSQL that
// would abort an enclosing transaction), and its result type must not
// depend on the table's columns (drivers such as pgx cache the prepared
// statement, which PostgreSQL refuses to reuse once its result type has
// changed). So it names holder in a subquery over the table, inside a
// query whose own row has a column holder = 'absent': SQL resolves the name
// in the innermost scope that has it, so the subquery yields the table's
// holder (NULL: the join matches no row) if the column exists, and the
// outer 'absent' if not.
func (g *SQLGuard) hasHolder(ctx context.Context, db Conn) (bool, error) {
	var holder sql.NullString
	if err := db.QueryRowContext(ctx, g.probe).Scan(&holder); err != nil {
		return false, fmt.Errorf("fence: looking for the holder column of table %s: %w", g.table, err)
	}
	return !holder.Valid, nil
}
