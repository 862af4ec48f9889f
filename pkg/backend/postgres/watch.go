package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// errNotDelivered means LISTEN was accepted but a notification sent to the
// channel never arrived: a transaction-mode pooler hands the session that
// listened to other clients.
var errNotDelivered = errors.New("a test notification did not arrive on the listening connection")

// Watch implements backend.Backend. The Watches of every handle of a
// Table share one change signal (signals): with SignalNotify or
// SignalAuto, one connection that LISTENs on Channel and signals each
// Watch on every notification naming this table and its election; with
// SignalPoll, or when SignalAuto finds that notifications do not arrive,
// one poller that reads the versions of every watched record every
// PollInterval and signals each Watch whose record changed. A lost
// listening connection is opened again after PollInterval, with a signal
// to every Watch, since a change may have been missed meanwhile. The
// channel is closed when ctx ends or the handle or its table is closed.
func (b *Backend) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	b.t.mu.Lock()
	if b.t.closed || b.closing.Err() != nil {
		b.t.mu.Unlock()
		close(ch)
		return ch
	}
	b.watches.Add(1)
	b.t.watches.Add(1)
	b.t.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.closing, cancel)
	w := &watcher{election: b.election, ch: ch}
	b.t.signals.add(w)
	context.AfterFunc(ctx, func() {
		stop()
		b.t.signals.remove(w)
		b.watches.Done()
		b.t.watches.Done()
	})
	return ch
}

// watcher is one Watch: its election, its channel, and what the poller
// last read of its record.
type watcher struct {
	election string
	ch       chan struct{}
	// Read and written by the poller alone, under signals.mu.
	version string
	known   bool
}

// signals is a Table's one change signal for the Watches of all its
// handles. It runs while any Watch does: the first one starts it, the
// last one to end stops it (its connection closed).
type signals struct {
	t *Table

	mu       sync.Mutex
	watchers map[string]map[*watcher]struct{} // by election
	count    int
	stop     context.CancelFunc // of the running signal; nil when none runs
	// listening is true while a listening connection is in effect: a new
	// Watch then gets the signal that every (re)started listener gives.
	listening bool
	// poll is true once SignalAuto found that notifications do not
	// arrive: later runs poll from the start.
	poll bool
}

func newSignals(t *Table) *signals {
	return &signals{t: t, watchers: map[string]map[*watcher]struct{}{}, poll: t.opts.Signal == SignalPoll}
}

// add registers w, and starts the signal if none runs.
func (s *signals) add(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watchers[w.election] == nil {
		s.watchers[w.election] = map[*watcher]struct{}{}
	}
	s.watchers[w.election][w] = struct{}{}
	s.count++
	if s.listening {
		// A change may have come before this Watch was registered.
		backend.Notify(w.ch)
	}
	if s.stop != nil {
		return
	}
	ctx, cancel := context.WithCancel(s.t.closing)
	s.stop = cancel
	s.t.watches.Add(1)
	go func() {
		defer s.t.watches.Done()
		s.run(ctx)
	}()
}

// remove ends w (its channel closed), and stops the signal if it was the
// last Watch.
func (s *signals) remove(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watchers[w.election], w)
	if len(s.watchers[w.election]) == 0 {
		delete(s.watchers, w.election)
	}
	close(w.ch)
	if s.count--; s.count == 0 && s.stop != nil {
		s.stop()
		s.stop = nil
		s.listening = false
	}
}

// notify signals the Watches of election.
func (s *signals) notify(election string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers[election] {
		backend.Notify(w.ch)
	}
}

// notifyAll signals every Watch, and notes whether a listening
// connection is in effect.
func (s *signals) notifyAll(listening bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listening = listening
	for _, ws := range s.watchers {
		for w := range ws {
			backend.Notify(w.ch)
		}
	}
}

// run is the signal until ctx ends: it listens, or polls where it must.
func (s *signals) run(ctx context.Context) {
	t := s.t
	for ctx.Err() == nil {
		s.mu.Lock()
		poll := s.poll
		s.mu.Unlock()
		if poll {
			s.runPoll(ctx)
			return
		}
		err := s.listen(ctx, t.opts.Signal == SignalAuto)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errNotDelivered) {
			t.log.Warn("postgres: notifications do not arrive (a transaction-mode pooler?); polling instead",
				"store", t.describe(), "poll", t.opts.PollInterval)
			s.mu.Lock()
			s.poll = true
			s.mu.Unlock()
			continue
		}
		t.log.Warn("postgres: listening for changes failed; listening again soon",
			"store", t.describe(), "err", err, "retry", t.opts.PollInterval)
		s.notifyAll(false)
		select {
		case <-ctx.Done():
		case <-time.After(t.opts.PollInterval):
		}
	}
}

// describe names the table and server, for the log.
func (t *Table) describe() string { return "postgres:" + t.where + "/" + t.tableName }

// listen runs one listening connection until ctx is done or the
// connection fails. With probe, it first sends a notification of its own
// and fails with errNotDelivered unless it arrives within ProbeTimeout.
func (s *signals) listen(ctx context.Context, probe bool) error {
	t := s.t
	config := t.config.Copy()
	if t.opts.listenDatabase != "" {
		config.Database = t.opts.listenDatabase
	}
	// A wait that times out only sets a deadline on the socket; the
	// default would send the server a cancel request each time.
	config.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	mine := t.tableName + " "
	var probePayload string
	probed := false
	config.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) {
		switch {
		case n.Channel != Channel:
		case strings.HasPrefix(n.Payload, mine):
			s.notify(n.Payload[len(mine):])
		case probePayload != "" && n.Payload == probePayload:
			probed = true
		}
	}
	conn, err := pgconn.ConnectConfig(ctx, config)
	if err != nil {
		return t.fail("listen", "", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := run(ctx, conn, "LISTEN "+quote(Channel)); err != nil {
		return t.fail("listen", "", err)
	}
	if probe {
		probePayload = "probe " + rand.Text()
		if _, err := t.pool.query(ctx, `SELECT pg_notify($1, $2)`, text(Channel), text(probePayload)); err != nil {
			return t.fail("listen", "", fmt.Errorf("sending a test notification: %w", err))
		}
		deadline := time.Now().Add(t.opts.ProbeTimeout)
		for !probed {
			wait, cancel := context.WithDeadline(ctx, deadline)
			err := conn.WaitForNotification(wait)
			cancel()
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case err == nil:
			case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
				return errNotDelivered
			default:
				return t.fail("listen", "", err)
			}
		}
	}
	// A change may have come before LISTEN took effect.
	s.notifyAll(true)
	for {
		wait, cancel := context.WithTimeout(ctx, t.opts.PollInterval)
		err := conn.WaitForNotification(wait)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
			// Quiet for an interval: check that the connection still works.
			check, cancel := context.WithTimeout(ctx, max(t.opts.PollInterval, time.Second))
			err := conn.Ping(check)
			cancel()
			if err != nil && ctx.Err() == nil {
				return t.fail("listen", "", err)
			}
		default:
			return t.fail("listen", "", err)
		}
	}
}

// runPoll reads the versions of every watched record, in one statement,
// every PollInterval until ctx is done, and signals a Watch after its
// first read and whenever its record's version differs from the last one
// read.
func (s *signals) runPoll(ctx context.Context) {
	t := s.t
	tick := time.NewTicker(t.opts.PollInterval)
	defer tick.Stop()
	for {
		s.mu.Lock()
		elections := make([]string, 0, len(s.watchers))
		for e := range s.watchers {
			elections = append(elections, e)
		}
		s.mu.Unlock()
		rows, err := t.pool.query(ctx, `SELECT name, version FROM `+t.table+` WHERE name = ANY($1::text[])`, textArray(elections))
		if err == nil {
			now := make(map[string]string, len(rows))
			for _, r := range rows {
				now[string(r[0])] = string(r[1])
			}
			s.mu.Lock()
			for e, ws := range s.watchers {
				if !slices.Contains(elections, e) {
					continue // registered after the read: its first read is next
				}
				for w := range ws {
					// The first read signals too: a write may have come
					// between Watch and the read.
					if !w.known || now[e] != w.version {
						backend.Notify(w.ch)
					}
					w.version, w.known = now[e], true
				}
			}
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// textArray is names as a text[] parameter in text form, each element
// quoted.
func textArray(names []string) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(n))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return []byte(b.String())
}
