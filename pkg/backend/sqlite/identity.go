package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// connectTries bounds how often the first connection is opened again
// because the path named another file after it opened than before.
const connectTries = 5

// connectMu makes the connections of this process open one at a time, so
// the descriptors that appear during one open are that connection's own.
var connectMu sync.Mutex

// fileConnector opens a pool's connections through connect, which checks
// each one against the file the Backend remembers.
type fileConnector struct {
	driver.Connector
	b *Backend
}

func (c fileConnector) Connect(ctx context.Context) (driver.Conn, error) {
	return c.b.connect(ctx, c.Connector)
}

// connect opens one connection and makes sure it is on the database file
// this Backend remembers, whatever pool it is for and whenever database/sql
// opens it. It stats the path, opens the connection and reads through it
// (which opens the -wal and -shm too), then stats the path again and looks
// at the descriptors the open added (/proc/self/fd, on Linux): the file the
// connection holds open must be the one the path named both before and
// after, and no descriptor it added may be another file at the path.
//
// The first connection (at Open) takes the identity: the file it opened,
// checked that way. When the path named another file after than before (the
// file was deleted or replaced as it opened), it is closed and opened again,
// up to connectTries times. Every later connection must be on that file; if
// the path names another, the store is lost (markLost) and the connection
// is refused with the loss.
func (b *Backend) connect(ctx context.Context, base driver.Connector) (driver.Conn, error) {
	connectMu.Lock()
	defer connectMu.Unlock()
	first := b.file == nil
	for try := 1; ; try++ {
		before, beforeErr := os.Stat(b.path)
		fds := descriptors()
		conn, err := base.Connect(ctx)
		if err != nil {
			return nil, err
		}
		if err := readThrough(ctx, conn); err != nil {
			_ = conn.Close()
			return nil, err
		}
		sides := b.sides.stat()
		after, err := os.Stat(b.path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			_ = conn.Close()
			return nil, fmt.Errorf("cannot check that %s is the database file connected to: %w", b.path, err)
		}
		held, heldOther := fds.added(b.sides.real, after)
		if first {
			if err == nil && beforeErr == nil && os.SameFile(before, after) && !heldOther ||
				err == nil && errors.Is(beforeErr, fs.ErrNotExist) && held && !heldOther {
				b.file = after
				b.sides.note(sides)
				return conn, nil
			}
			_ = conn.Close()
			if try == connectTries {
				return nil, fmt.Errorf("the file at %s changed %d times while it was being opened (deleted or replaced); open it again", b.path, try)
			}
			continue
		}
		switch {
		case err != nil:
			_ = conn.Close()
			return nil, b.markLost("is missing")
		case !os.SameFile(after, b.file):
			_ = conn.Close()
			return nil, b.markLost("is now another file (" + describeFile(after) + ")")
		case beforeErr != nil || !os.SameFile(before, b.file) || heldOther:
			_ = conn.Close()
			return nil, b.markLost("was another file while a connection opened")
		}
		return conn, nil
	}
}

// readThrough runs a read on a connection just opened: SQLite opens the
// -wal and -shm of a database in WAL mode at its first read.
func readThrough(ctx context.Context, conn driver.Conn) error {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return nil
	}
	rows, err := q.QueryContext(ctx, "SELECT count(*) FROM sqlite_master", nil)
	if err != nil {
		return err
	}
	dest := make([]driver.Value, 1)
	err = rows.Next(dest)
	return errors.Join(err, rows.Close())
}

var _ backend.LossNotifier = (*Backend)(nil)

// Lost implements backend.LossNotifier. The channel is closed once the
// path no longer names the file Open opened (deleted, or another file
// renamed or created there); Close leaves it open.
func (b *Backend) Lost() <-chan struct{} { return b.lost }

// lossError returns the loss once one was noticed, and nil before.
func (b *Backend) lossError() error {
	select {
	case <-b.lost:
		return b.lostErr
	default:
		return nil
	}
}

// checkFile stats the path and compares it with the file Open opened. It
// returns nil while they are the same file, an error wrapping
// backend.ErrStoreLost once they are not (and from then on, without a
// stat), and another error when the path cannot be examined (say, its
// directory became unreadable): that is not a loss, but the call fails
// rather than vouch for a store it could not check.
//
// While the file is the same, the -wal and -shm found beside it, looked
// at just before, are noted as its own (see removeStale).
func (b *Backend) checkFile() error {
	if err := b.lossError(); err != nil {
		return err
	}
	sides := b.sides.stat()
	fi, err := os.Stat(b.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return b.markLost("is missing")
	case err != nil:
		return fmt.Errorf("cannot check that %s is still the database opened: %w", b.path, err)
	case !os.SameFile(fi, b.file):
		return b.markLost("is now another file (" + describeFile(fi) + ")")
	}
	b.sides.note(sides)
	return nil
}

// markLost records the loss once, closes Lost, removes the old file's
// -wal and -shm (removeStale), logs the loss and what was removed, and
// returns the loss. found says what the path names now. A caller that
// finds the loss while another is recording it waits until it is done,
// so a call that fails with the loss returns after the removal.
func (b *Backend) markLost(found string) error {
	b.lostOnce.Do(func() {
		b.lostErr = &lostError{path: b.path, found: found, opened: describeFile(b.file)}
		close(b.lost)
		b.log.Error("sqlite: the database file was deleted or replaced; this process stops using it",
			"err", b.lostErr, "staleFiles", b.sides.removeStale(b.path, b.file))
	})
	return b.lostErr
}

// lostError is the loss of the database file: it wraps
// backend.ErrStoreLost and says what the path names now.
type lostError struct {
	path, found, opened string
}

func (e *lostError) Error() string {
	return fmt.Sprintf("%v: database %s %s (opened: %s); stop claiming, and start again "+
		"on the file now at the path", backend.ErrStoreLost, e.path, e.found, e.opened)
}

func (e *lostError) Unwrap() error { return backend.ErrStoreLost }

// descriptorSet is the files this process has open, by descriptor number
// (descriptors); nil where the system does not say.
type descriptorSet map[string]os.FileInfo

// added looks at the descriptors opened since s was taken: whether one of
// them is the file want, and whether one is another file at the database's
// location real (open by that name, or by it once removed). Where the
// system does not list descriptors it reports (true, false): no evidence
// either way.
func (s descriptorSet) added(real string, want os.FileInfo) (holdsWant, holdsOther bool) {
	now := descriptors()
	if s == nil || now == nil {
		return true, false
	}
	for name, fi := range now {
		if old, ok := s[name]; ok && os.SameFile(old, fi) {
			continue
		}
		if want != nil && os.SameFile(fi, want) {
			holdsWant = true
			continue
		}
		if target, err := os.Readlink(procFDs + "/" + name); err == nil && (target == real || target == real+" (deleted)") {
			holdsOther = true
		}
	}
	return holdsWant, holdsOther
}
