package sqlite

import (
	"database/sql"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// writerFor returns the handle a write of rec runs on. A write that names
// no holder, a release, which starts no term and gives nobody a claim,
// runs on the release handle and commits without waiting for the disk
// (synchronous=NORMAL); every other write runs on the writer pool and
// commits with synchronous=FULL. Each handle's level is set by its DSN, so
// no connection ever changes level.
func (b *Backend) writerFor(rec backend.Record) *sql.DB {
	if rec.HolderIdentity == "" {
		return b.releaseDB
	}
	return b.db
}

// WriterDSN is the modernc.org/sqlite data source name of the connections
// a Backend writes with, at the default busy timeout: WAL journal mode,
// BEGIN IMMEDIATE, and synchronous=FULL, or synchronous=NORMAL for the
// connection that writes releases (release true). It is exported so that
// a measurement of what the disk itself costs (hack/bench's floor of the
// hand-off) commits exactly as the backend does.
func WriterDSN(path string, release bool) string {
	if release {
		return dsn(path, DefaultBusyTimeout, releasePool)
	}
	return dsn(path, DefaultBusyTimeout, writerPool)
}
