package sqlite

import (
	"database/sql"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// relaxedCommit reports whether a write of rec may commit without waiting
// for the disk (synchronous=NORMAL): only a write that names no holder, a
// release, which starts no term and gives nobody a claim. Every other
// write commits with synchronous=FULL.
func relaxedCommit(rec backend.Record) bool { return rec.HolderIdentity == "" }

// writerFor returns the handle a write of rec runs on: the release handle
// (synchronous=NORMAL) for a relaxed commit, else the writer pool
// (synchronous=FULL). Each handle's level is set by its DSN, so no
// connection ever changes level.
func (b *Backend) writerFor(rec backend.Record) *sql.DB {
	if relaxedCommit(rec) {
		return b.releaseDB
	}
	return b.db
}
