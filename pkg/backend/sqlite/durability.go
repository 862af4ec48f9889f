package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// relaxedCommit reports whether a write of rec may commit without waiting
// for the disk (synchronous=NORMAL): only a write that names no holder, a
// release, which starts no term and gives nobody a claim. Every other
// write commits with synchronous=FULL.
func relaxedCommit(rec backend.Record) bool { return rec.HolderIdentity == "" }

// writeConn takes a writer connection for one write of rec. For a relaxed
// commit it switches the connection to synchronous=NORMAL; done switches
// it back to FULL once the transaction has ended, or, if that fails,
// discards the connection so that the pool never hands out a relaxed one,
// and releases it. SQLite refuses to change the level inside a
// transaction, hence a connection of its own around the transaction.
func (b *Backend) writeConn(ctx context.Context, rec backend.Record) (conn *sql.Conn, done func(), err error) {
	conn, err = b.db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !relaxedCommit(rec) {
		return conn, func() { _ = conn.Close() }, nil
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		discard(conn)
		return nil, nil, err
	}
	return conn, func() {
		if _, err := conn.ExecContext(context.Background(), "PRAGMA synchronous = FULL"); err != nil {
			discard(conn)
			return
		}
		_ = conn.Close()
	}, nil
}

// discard closes conn's driver connection instead of returning it to the
// pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
