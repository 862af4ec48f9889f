package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// rememberFile records which file the path names once Open has the
// database open, for checkFile to compare against. os.SameFile is the whole
// comparison: on unix it compares the device and inode numbers of
// syscall.Stat_t; elsewhere the system's own file identity. Calling it
// here makes Windows read that identity now, while the path still names the
// file, rather than at the first comparison.
func (b *Backend) rememberFile() error {
	b.sides.init(b.path)
	sides := b.sides.stat()
	fi, err := os.Stat(b.path)
	if err != nil {
		return fmt.Errorf("sqlite: open %s: stat the database just opened: %w", b.path, err)
	}
	os.SameFile(fi, fi)
	b.file = fi
	b.sides.note(sides)
	b.lost = make(chan struct{})
	return nil
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
