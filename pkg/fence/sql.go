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
// database/sql: a table of (resource, token, holder), the last term each
// resource accepted, that each write updates in its own transaction. It
// works unchanged on SQLite (3.24 or later, e.g. modernc.org/sqlite) and
// PostgreSQL (9.5 or later, e.g. github.com/jackc/pgx/v5/stdlib): Check
// runs one statement that both accept,
//
//	INSERT INTO fence_tokens AS f (resource, token, holder) VALUES ($1, $2, $3)
//	ON CONFLICT (resource) DO UPDATE SET token = excluded.token, holder = excluded.holder
//	WHERE f.token < excluded.token
//	   OR (f.token = excluded.token AND (f.holder = excluded.holder OR f.holder = ''))
//
// which inserts the resource's first term, records a higher token, lets the
// same term write again, and changes no row for a lower token
// (ErrStaleToken) or for an equal token from another holder
// (ErrTokenReused). An empty holder is a row written before the guard
// stored holders (see EnsureTable): the first holder to present that token
// binds it.
//
// # Why the check is atomic with the write
//
// The statement takes a write lock that is held until the transaction ends:
// the row lock on the resource's row in PostgreSQL (or, for a first insert,
// the lock on the new key), the database's write lock in SQLite. A
// concurrent transaction checking the same resource waits for that lock; in
// PostgreSQL's default READ COMMITTED it then re-evaluates the WHERE clause
// against the committed row, in SQLite it starts from the committed state.
// So no other term can be recorded between this check and this commit, and
// once one that this term does not follow has been, this check fails. That
// makes the caller's write safe only if
//
//   - the write is made in the same transaction as Check,
//   - the transaction commits only if Check returned nil (roll back on any
//     error), and
//   - every writer of the resource checks its term this way.
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
	table    string
	create   string // the table, for a new database
	probe    string // tells whether the table has the holder column
	migrate  string // adds the holder column to a table of an earlier version
	check    string // the fenced upsert
	accepted string // reads the accepted term, to explain a refusal
}

// NewSQLGuard returns a guard that keeps its terms in table ("" means
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
		create: "CREATE TABLE IF NOT EXISTS " + table + " (resource TEXT PRIMARY KEY," +
			" token BIGINT NOT NULL CHECK (token >= 0), holder TEXT NOT NULL DEFAULT '')",
		probe: "SELECT (SELECT holder FROM (SELECT 1 AS one) AS one LEFT JOIN " + table + " ON 1 = 0)" +
			" FROM (SELECT 'absent' AS holder) AS outside",
		migrate: "ALTER TABLE " + table + " ADD COLUMN holder TEXT NOT NULL DEFAULT ''",
		check: "INSERT INTO " + table + " AS f (resource, token, holder) VALUES ($1, $2, $3)" +
			" ON CONFLICT (resource) DO UPDATE SET token = excluded.token, holder = excluded.holder" +
			" WHERE f.token < excluded.token" +
			" OR (f.token = excluded.token AND (f.holder = excluded.holder OR f.holder = ''))",
		accepted: "SELECT token, holder FROM " + table + " WHERE resource = $1",
	}, nil
}

// Table returns the name of the guard's table.
func (g *SQLGuard) Table() string { return g.table }

// Check records term as the last accepted for resource, inside tx, if it
// follows the term accepted before (a higher token, or the same token from
// the same holder). Otherwise it returns an error wrapping ErrStaleToken
// (ErrTokenReused for an equal token from another holder) that names the
// accepted term. A negative token or an empty holder returns
// ErrInvalidToken. On any error the caller must roll tx back; see SQLGuard
// for what makes the check atomic with the caller's write.
func (g *SQLGuard) Check(ctx context.Context, tx *sql.Tx, resource string, term TermID) error {
	if err := term.check(); err != nil {
		return err
	}
	if tx == nil {
		return errors.New("fence: Check needs the write's transaction, got nil")
	}
	failed := func(err error) error {
		return fmt.Errorf("fence: checking %v for %q in %s: %w", term, shortName(resource), g.table, err)
	}
	res, err := tx.ExecContext(ctx, g.check, resource, term.Token, term.Holder)
	if err != nil {
		return failed(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return failed(err)
	}
	if n > 0 {
		return nil
	}
	// Refused. The statement left the row locked (PostgreSQL) or the
	// database locked (SQLite), so this reads the term it was refused for.
	var accepted TermID
	if err := tx.QueryRowContext(ctx, g.accepted, resource).Scan(&accepted.Token, &accepted.Holder); err != nil {
		return fmt.Errorf("%w: resource %q accepted a term that %v does not follow (reading it: %v)",
			ErrStaleToken, shortName(resource), term, err)
	}
	return refusal(resource, accepted, term)
}

// CheckShard is Check for the data of one shard of a shard group: it
// records term as the last accepted for the shard's resource
// (term.Resource(), "<group>/<N>/shard-<i>", a row of the guard's table) if it
// follows the term accepted before for that shard. Each shard has its own
// row, as it has its own election and tokens. A term with no group, no
// count, or a shard outside its count returns ErrInvalidToken. The rules
// of Check apply: the
// write in tx, and a rollback on any error.
func (g *SQLGuard) CheckShard(ctx context.Context, tx *sql.Tx, term ShardTermID) error {
	if err := term.check(); err != nil {
		return err
	}
	return g.Check(ctx, tx, term.Resource(), term.TermID)
}
