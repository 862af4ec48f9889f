package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
)

// DefaultTable is the table SQLGuard uses when given no name.
const DefaultTable = "fence_tokens"

// identifier is a table name, optionally schema-qualified, safe to splice
// into SQL unquoted.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// SQLGuard fences resources kept in an SQL database reached through
// database/sql: a table of (resource, highest token accepted) that each
// write updates in its own transaction. It works unchanged on SQLite
// (3.24 or later, e.g. modernc.org/sqlite) and PostgreSQL (9.5 or later,
// e.g. github.com/jackc/pgx/v5/stdlib): Check runs one statement that both
// accept,
//
//	INSERT INTO fence_tokens AS f (resource, token) VALUES ($1, $2)
//	ON CONFLICT (resource) DO UPDATE SET token = excluded.token
//	WHERE f.token <= excluded.token
//
// which inserts the resource's first token, raises a lower or equal one, and
// changes no row for a stale token: 0 rows affected is ErrStaleToken.
//
// # Why the check is atomic with the write
//
// The statement takes a write lock that is held until the transaction ends:
// the row lock on the resource's row in PostgreSQL (or, for a first insert,
// the lock on the new key), the database's write lock in SQLite. A
// concurrent transaction checking the same resource waits for that lock; in
// PostgreSQL's default READ COMMITTED it then re-evaluates the WHERE clause
// against the committed row, in SQLite it starts from the committed state.
// So a newer token cannot be recorded between this check and this commit,
// and once a newer one has been, this check fails. That makes the caller's
// write safe only if
//
//   - the write is made in the same transaction as Check,
//   - the transaction commits only if Check returned nil (roll back on any
//     error), and
//   - every writer of the resource checks its token this way.
//
// Calling Check first is best: the lock is then taken before the write's
// own locks (no deadlock with a concurrent leader), and a stale leader does
// no work. Under REPEATABLE READ or SERIALIZABLE, PostgreSQL answers a
// concurrent check with a serialization failure instead of waiting; under
// SQLite a transaction that read before its check can get SQLITE_BUSY.
// Both are errors, never a stale write: roll back, and retry if still leader.
// With SQLite, use a busy timeout (modernc: _pragma=busy_timeout(5000)) and
// preferably immediate transactions (_txlock=immediate).
type SQLGuard struct {
	table  string
	create string
	check  string
}

// NewSQLGuard returns a guard that keeps its tokens in table ("" means
// DefaultTable), a plain or schema-qualified name.
func NewSQLGuard(table string) (*SQLGuard, error) {
	if table == "" {
		table = DefaultTable
	}
	if !identifier.MatchString(table) {
		return nil, fmt.Errorf("fence: table name %q: want [schema.]name of letters, digits and _", table)
	}
	return &SQLGuard{
		table: table,
		create: "CREATE TABLE IF NOT EXISTS " + table +
			" (resource TEXT PRIMARY KEY, token BIGINT NOT NULL CHECK (token >= 0))",
		check: "INSERT INTO " + table + " AS f (resource, token) VALUES ($1, $2)" +
			" ON CONFLICT (resource) DO UPDATE SET token = excluded.token" +
			" WHERE f.token <= excluded.token",
	}, nil
}

// Table returns the name of the guard's table.
func (g *SQLGuard) Table() string { return g.table }

// Execer is what EnsureTable needs: *sql.DB, *sql.Conn and *sql.Tx have it.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// EnsureTable creates the guard's table if it does not exist:
// (resource TEXT PRIMARY KEY, token BIGINT NOT NULL CHECK (token >= 0)).
// Run it once at start-up or in a migration, not concurrently with itself.
func (g *SQLGuard) EnsureTable(ctx context.Context, db Execer) error {
	if _, err := db.ExecContext(ctx, g.create); err != nil {
		return fmt.Errorf("fence: creating table %s: %w", g.table, err)
	}
	return nil
}

// Check records token as the highest accepted for resource, inside tx, or
// returns an error wrapping ErrStaleToken if a higher token was accepted
// before. Equal tokens pass. A negative token returns ErrInvalidToken. On
// any error the caller must roll tx back; see SQLGuard for what makes the
// check atomic with the caller's write.
func (g *SQLGuard) Check(ctx context.Context, tx *sql.Tx, resource string, token int64) error {
	if token < 0 {
		return fmt.Errorf("%w: %d", ErrInvalidToken, token)
	}
	if tx == nil {
		return errors.New("fence: Check needs the write's transaction, got nil")
	}
	res, err := tx.ExecContext(ctx, g.check, resource, token)
	if err != nil {
		return fmt.Errorf("fence: checking token %d for %q in %s: %w", token, shortName(resource), g.table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fence: checking token %d for %q in %s: %w", token, shortName(resource), g.table, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: resource %q has accepted a token above %d", ErrStaleToken, shortName(resource), token)
	}
	return nil
}
