package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// maxRetryDelay caps the wait between attempts while a watch's connection
// keeps failing (a PollInterval longer than this is kept as it is).
const maxRetryDelay = 2 * time.Second

// Watch implements backend.Backend. Each call takes a connection of its own
// and reads PRAGMA data_version on it; the value changes whenever another
// connection (in any process, this one's writers included) has committed
// to the file, and each change sends a signal. Polling never writes.
//
// It reads when the file or its -wal is written, as the watch on the
// file's directory reports (fsnotify; see watchFile), and then every
// followUpEvery until the value changes, for at most followUpFor, since
// the write is reported just before the commit becomes visible; so a
// standby learns of a release or takeover within milliseconds. It also
// reads every PollInterval whatever happens, the fallback for a write the
// directory watch does not report (the watch could not be set up, or
// dropped events).
//
// The first signal comes as soon as the watch has read its starting value,
// and another after every reconnection, so that a change made before the
// watch could observe it is never missed; such a signal may be spurious. A
// failing connection is closed and reopened, backing off up to a few
// seconds; the caller's own polling covers the gap.
//
// A loss of the file (see Lost) sends one more signal, so a standby that
// only watches calls Get and learns of it.
//
// The channel is closed once ctx is done or the Backend is closed.
func (b *Backend) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		close(ch)
		return ch
	}
	b.watches.Add(1)
	b.mu.Unlock()
	go b.watch(ctx, ch)
	return ch
}

func (b *Backend) watch(ctx context.Context, ch chan struct{}) {
	defer b.watches.Done()
	defer close(ch)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.closing, cancel)()

	p := &poller{db: b.watchDB, election: b.election}
	defer p.close()
	timer := time.NewTimer(0) // the first poll takes the baseline at once
	defer timer.Stop()
	delay := b.pollInterval
	lost := b.lost
	written := b.wakeups.next()
	var followUntil time.Time // while reads follow a notification
	for {
		select {
		case <-ctx.Done():
			return
		case <-lost:
			backend.Notify(ch)
			lost = nil // signalled once
			continue
		case <-written:
			written = b.wakeups.next() // before the read: no write after it is missed
			followUntil = time.Now().Add(followUpFor)
			timer.Stop()
		case <-timer.C:
		}
		advanced, changed, err := p.poll(ctx)
		if err != nil {
			delay = min(2*delay, max(maxRetryDelay, b.pollInterval))
		} else {
			delay = b.pollInterval
		}
		if changed {
			backend.Notify(ch)
		}
		if advanced {
			followUntil = time.Time{} // the commit shows, this row's or another's
		}
		next := delay
		if err == nil && time.Now().Before(followUntil) {
			next = min(next, followUpEvery)
		}
		timer.Reset(next)
	}
}

// poller holds one watch's connection, the data_version last read on it,
// and the election's row as read after it. data_version is per
// connection, so a new connection starts a new baseline.
type poller struct {
	db       *sql.DB
	election string
	conn     *sql.Conn
	last     int64
	// row is the election's row as read when data_version last changed,
	// every column; "" while the row is missing.
	row string
}

// poll reads data_version, connecting first if needed, and reports
// whether it advanced (a commit to the file shows, or the connection is
// new). When it advanced, poll reads the election's row too (every column,
// so that an edit by hand that keeps the version counts), and reports a
// change only if the row differs from the one last read: a write to
// another election's row of the file (a shard group's other records) is
// no change of this one. It reports a change on every new connection. On
// an error of data_version the connection is closed, to be reopened next
// time; a row that cannot be read counts as a row of its own, so it
// reports one change, and Get reports the error.
func (p *poller) poll(ctx context.Context) (advanced, changed bool, err error) {
	fresh := false
	if p.conn == nil {
		if p.conn, err = p.db.Conn(ctx); err != nil {
			p.conn = nil
			return false, false, err
		}
		fresh = true
	}
	var v int64
	if err := p.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		p.close()
		return false, false, err
	}
	if !fresh && v == p.last {
		return false, false, nil
	}
	var (
		version, duration, transitions, acquire, renew sql.NullInt64
		holder, handoff                                sql.NullString
		row                                            string
	)
	err = p.conn.QueryRowContext(ctx, selectRecord, p.election).Scan(&version, &holder, &duration, &acquire, &renew, &transitions, &handoff)
	switch {
	case err == nil:
		row = fmt.Sprint(version, holder, duration, acquire, renew, transitions, handoff)
	case !errors.Is(err, sql.ErrNoRows):
		row = "unreadable: " + err.Error()
	}
	changed = fresh || row != p.row
	p.last, p.row = v, row
	return true, changed, nil
}

func (p *poller) close() {
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn = nil
	}
}
