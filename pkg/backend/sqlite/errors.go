package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// fail wraps err from operation op with the election (and, opening, the
// file) and, for the failures
// an operator can act on, a sentence naming the file and what to check.
// Sentinel and context errors stay reachable through errors.Is, and SQLite's
// own error through errors.As.
func (b *Backend) fail(op string, err error) error {
	if op == "open" { // the file, which the operator gave, first
		return fmt.Errorf("sqlite: open %s (election %q): %w", b.path, b.election, b.explain(err))
	}
	return fmt.Errorf("sqlite: %s %q: %w", op, b.election, b.explain(err))
}

// explained is an error with a sentence in front of the underlying error.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg + ": " + e.err.Error() }
func (e *explained) Unwrap() error { return e.err }

// explain classifies err by SQLite's primary result code (extended codes
// carry it in the low byte). Errors that are not SQLite's pass unchanged.
func (b *Backend) explain(err error) error {
	var se *modernc.Error
	if !errors.As(err, &se) {
		if errors.Is(err, fs.ErrPermission) {
			msg := fmt.Sprintf("permission denied on database %s or its directory (uid %d)", b.path, os.Geteuid())
			return &explained{msg, err}
		}
		return err
	}
	uid := os.Geteuid()
	var msg string
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		msg = fmt.Sprintf("database %s is locked: another process held the write lock "+
			"longer than the busy timeout (%v)", b.path, b.busyTimeout)
	case sqlite3.SQLITE_READONLY:
		msg = fmt.Sprintf("database %s is read-only: this process (uid %d) must be able to write "+
			"the file and its directory, where SQLite keeps the -wal and -shm files", b.path, uid)
	case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		msg = fmt.Sprintf("cannot open database %s: this process (uid %d) must be able to read "+
			"and write the file and create files in its directory", b.path, uid)
	case sqlite3.SQLITE_NOTADB:
		msg = fmt.Sprintf("%s is not an SQLite database", b.path)
	case sqlite3.SQLITE_CORRUPT:
		msg = fmt.Sprintf("database %s is corrupt", b.path)
	case sqlite3.SQLITE_FULL:
		msg = fmt.Sprintf("the disk holding database %s is full", b.path)
	case sqlite3.SQLITE_IOERR:
		msg = fmt.Sprintf("I/O error on database %s", b.path)
	default:
		msg = fmt.Sprintf("database %s", b.path)
	}
	return &explained{msg, err}
}
