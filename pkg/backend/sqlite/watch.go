package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// maxRetryDelay caps the wait between attempts while a watch's connection
// keeps failing (a PollInterval longer than this is kept as it is).
const maxRetryDelay = 2 * time.Second

// Watch implements backend.Backend. The Backends of a process open on one
// file, whatever their elections, share one watch of it (processFile): one
// connection that reads PRAGMA data_version, whose value changes whenever
// another connection (in any process, this one's writers included) has
// committed to the file. When it changes, the watch reads every election's
// row in one query, and each Watch channel whose election's row differs
// from the one last read gets a signal: a write to another election of the
// file (a shard group's other records) is no change of this one; every
// column is compared, so an edit by hand that keeps the version counts.
// Polling never writes.
//
// It reads when the file or its -wal is written, as the watch on the
// file's directory reports (fsnotify; see watchFile), and then every
// followUpEvery until the value changes, for at most followUpFor, since
// the write is reported just before the commit becomes visible; so a
// standby learns of a release or takeover within milliseconds. It also
// reads every PollInterval whatever happens (the shortest of the
// PollIntervals of the Backends watching), the fallback for a write the
// directory watch does not report (the watch could not be set up, or
// dropped events).
//
// The first signal comes as soon as the watch has read a starting value
// after the call, and another after every reconnection, so that a change
// made before the watch could observe it is never missed; such a signal
// may be spurious. A failing connection is closed and reopened, backing
// off up to a few seconds; the caller's own polling covers the gap.
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
	sub := b.shared.subscribe(b.election, b.pollInterval)
	go b.watch(ctx, ch, sub)
	return ch
}

func (b *Backend) watch(ctx context.Context, ch chan struct{}, sub *rowSubscription) {
	defer b.watches.Done()
	defer close(ch)
	defer b.shared.unsubscribe(sub)
	lost := b.lost
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.closing.Done():
			return
		case <-lost:
			backend.Notify(ch)
			lost = nil // signalled once
		case <-sub.changed:
			backend.Notify(ch)
		}
	}
}

// rowSubscription is one Watch's interest in one election's row.
type rowSubscription struct {
	election string
	interval time.Duration
	changed  chan struct{} // capacity 1
	// Read and written by the poll loop alone, under processFile.mu:
	started bool   // a starting value was read since it subscribed
	row     string // the row as last read; "" while missing
}

// subscribe adds a Watch of election and starts the poll loop if none
// runs.
func (pf *processFile) subscribe(election string, interval time.Duration) *rowSubscription {
	sub := &rowSubscription{election: election, interval: interval, changed: make(chan struct{}, 1)}
	pf.mu.Lock()
	defer pf.mu.Unlock()
	pf.subs[sub] = true
	if pf.stop == nil {
		var ctx context.Context
		ctx, pf.stop = context.WithCancel(context.Background())
		pf.polling.Add(1)
		go pf.poll(ctx)
	}
	select {
	case pf.poke <- struct{}{}:
	default:
	}
	return sub
}

// unsubscribe removes sub, and stops the poll loop with the last one.
func (pf *processFile) unsubscribe(sub *rowSubscription) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	delete(pf.subs, sub)
	if len(pf.subs) == 0 && pf.stop != nil {
		pf.stop()
		pf.stop = nil
	}
}

// interval is the shortest PollInterval of the subscriptions.
func (pf *processFile) interval() time.Duration {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	shortest := time.Duration(-1)
	for sub := range pf.subs {
		if shortest < 0 || sub.interval < shortest {
			shortest = sub.interval
		}
	}
	if shortest < 0 {
		return DefaultPollInterval
	}
	return shortest
}

// poll is the loop of one run of the watch: it reads at once, on every
// notification (following it up until the commit shows), on every new
// subscription, and every interval.
func (pf *processFile) poll(ctx context.Context) {
	defer pf.polling.Done()
	p := &poller{db: pf.db}
	defer p.close()
	timer := time.NewTimer(0) // the first poll takes the baseline at once
	defer timer.Stop()
	delay := pf.interval()
	written := pf.wakeups.next()
	var followUntil time.Time // while reads follow a notification
	for {
		select {
		case <-ctx.Done():
			return
		case <-written:
			written = pf.wakeups.next() // before the read: no write after it is missed
			followUntil = time.Now().Add(followUpFor)
			timer.Stop()
		case <-pf.poke:
			timer.Stop()
		case <-timer.C:
		}
		advanced, err := p.poll(ctx)
		interval := pf.interval()
		if err != nil {
			delay = min(2*delay, max(maxRetryDelay, interval))
		} else {
			delay = interval
			pf.deliver(p)
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

// deliver signals every subscription whose election's row, as p last read
// it, differs from the one it saw, every subscription still without a
// starting value, and every one after a reconnection.
func (pf *processFile) deliver(p *poller) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	for sub := range pf.subs {
		if sub.see(p) {
			select {
			case sub.changed <- struct{}{}:
			default:
			}
		}
	}
	p.fresh = false
}

// see takes the row of sub's election as p last read it, and reports
// whether that is a change for sub: the row differs from the one it saw,
// or sub has no starting value yet, or p read on a new connection.
func (sub *rowSubscription) see(p *poller) bool {
	row := p.row(sub.election)
	if sub.started && !p.fresh && row == sub.row {
		return false
	}
	sub.started, sub.row = true, row
	return true
}

// poller holds one watch loop's connection, the data_version last read on
// it, and every election's row as read after it. data_version is per
// connection, so a new connection starts a new baseline.
type poller struct {
	db   *sql.DB
	conn *sql.Conn
	last int64
	// rows are the elections' rows as read when data_version last changed,
	// every column, by election.
	rows map[string]string
	// unreadable is the error that kept the rows from being read, "" when
	// they were.
	unreadable string
	// fresh: rows were read on a new connection and not yet delivered.
	fresh bool
}

// poll reads data_version, connecting first if needed, and reports
// whether it advanced (a commit to the file shows, or the connection is
// new). When it advanced, poll reads every election's row too. On an
// error of data_version the connection is closed, to be reopened next
// time.
func (p *poller) poll(ctx context.Context) (advanced bool, err error) {
	if p.conn == nil {
		if p.conn, err = p.db.Conn(ctx); err != nil {
			p.conn = nil
			return false, err
		}
		p.fresh = true
	}
	var v int64
	if err := p.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		p.close()
		return false, err
	}
	if !p.fresh && v == p.last && p.rows != nil {
		return false, nil
	}
	rows, err := readRows(ctx, p.conn)
	if err != nil {
		// A table that cannot be read counts as rows of their own, so each
		// Watch gets one signal, and Get reports the error.
		rows = map[string]string{}
		p.unreadable = "unreadable: " + err.Error()
	} else {
		p.unreadable = ""
	}
	p.last, p.rows = v, rows
	return true, nil
}

// row is election's row as last read.
func (p *poller) row(election string) string {
	if p.unreadable != "" {
		return p.unreadable
	}
	return p.rows[election]
}

// readRows reads every election's row, every column, as text to compare.
// Values are read as they are stored, whatever their type, so that a row
// edited by hand into a shape Get refuses still reads here as a change
// (Get then reports what is wrong with it).
func readRows(ctx context.Context, conn *sql.Conn) (map[string]string, error) {
	rows, err := conn.QueryContext(ctx, selectRecords)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	out := map[string]string{}
	for rows.Next() {
		var name any
		cols := make([]any, 8)
		dest := []any{&name}
		for i := range cols {
			dest = append(dest, &cols[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out[text(name)] = fmt.Sprintf("%#v", cols)
	}
	return out, rows.Err()
}

// text is a name as Get's WHERE name = ? matches it.
func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return fmt.Sprint(v)
}

func (p *poller) close() {
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn = nil
	}
}
