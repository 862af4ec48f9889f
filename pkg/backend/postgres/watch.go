package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// errNotDelivered means LISTEN was accepted but a notification sent to the
// channel never arrived: a transaction-mode pooler hands the session that
// listened to other clients.
var errNotDelivered = errors.New("a test notification did not arrive on the listening connection")

// Watch implements backend.Backend. Each Watch has a connection of its
// own: with SignalNotify or SignalAuto it LISTENs on Channel and signals
// on every notification naming this table and election; with SignalPoll,
// or when SignalAuto finds that notifications do not arrive, it reads the
// record's version every PollInterval and signals when it changed. A lost
// listening connection is opened again after PollInterval, with a signal,
// since a change may have been missed meanwhile.
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
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.closing, cancel)
	go func() {
		defer b.watches.Done()
		defer close(ch)
		defer stop()
		defer cancel()
		b.watch(ctx, ch)
	}()
	return ch
}

func (b *Backend) watch(ctx context.Context, ch chan struct{}) {
	mode := b.opts.Signal
	for ctx.Err() == nil {
		if mode == SignalPoll {
			b.poll(ctx, ch)
			return
		}
		err := b.listen(ctx, ch, mode == SignalAuto)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errNotDelivered) {
			b.log.Warn("postgres: notifications do not arrive (a transaction-mode pooler?); polling instead",
				"store", b.Describe(), "poll", b.opts.PollInterval)
			mode = SignalPoll
			continue
		}
		b.log.Warn("postgres: listening for changes failed; listening again soon",
			"store", b.Describe(), "err", err, "retry", b.opts.PollInterval)
		backend.Notify(ch)
		select {
		case <-ctx.Done():
		case <-time.After(b.opts.PollInterval):
		}
	}
}

// listen runs one listening connection until ctx is done or the
// connection fails. With probe, it first sends a notification of its own
// and fails with errNotDelivered unless it arrives within ProbeTimeout.
func (b *Backend) listen(ctx context.Context, ch chan struct{}, probe bool) error {
	config := b.config.Copy()
	if b.opts.listenDatabase != "" {
		config.Database = b.opts.listenDatabase
	}
	// A wait that times out only sets a deadline on the socket; the
	// default would send the server a cancel request each time.
	config.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	mine := b.tableName + " " + b.opts.Election
	var probePayload string
	probed := false
	config.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) {
		switch {
		case n.Channel != Channel:
		case n.Payload == mine:
			backend.Notify(ch)
		case probePayload != "" && n.Payload == probePayload:
			probed = true
		}
	}
	conn, err := pgconn.ConnectConfig(ctx, config)
	if err != nil {
		return b.fail("listen", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := run(ctx, conn, "LISTEN "+quote(Channel)); err != nil {
		return b.fail("listen", err)
	}
	if probe {
		probePayload = "probe " + rand.Text()
		if _, err := b.pool.query(ctx, `SELECT pg_notify($1, $2)`, text(Channel), text(probePayload)); err != nil {
			return b.fail("listen", fmt.Errorf("sending a test notification: %w", err))
		}
		deadline := time.Now().Add(b.opts.ProbeTimeout)
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
				return b.fail("listen", err)
			}
		}
	}
	// A change may have come before LISTEN took effect.
	backend.Notify(ch)
	for {
		wait, cancel := context.WithTimeout(ctx, b.opts.PollInterval)
		err := conn.WaitForNotification(wait)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
			// Quiet for an interval: check that the connection still works.
			check, cancel := context.WithTimeout(ctx, max(b.opts.PollInterval, time.Second))
			err := conn.Ping(check)
			cancel()
			if err != nil && ctx.Err() == nil {
				return b.fail("listen", err)
			}
		default:
			return b.fail("listen", err)
		}
	}
}

// poll reads the record's version every PollInterval until ctx is done,
// and signals after the first read and whenever it differs from the last
// one read.
func (b *Backend) poll(ctx context.Context, ch chan struct{}) {
	last, known := "", false
	tick := time.NewTicker(b.opts.PollInterval)
	defer tick.Stop()
	for {
		rows, err := b.pool.query(ctx, `SELECT version FROM `+b.table+` WHERE name = $1`, text(b.opts.Election))
		if err == nil {
			now := ""
			if len(rows) == 1 {
				now = string(rows[0][0])
			}
			// The first read signals too: a write may have come between
			// Watch and the read.
			if !known || now != last {
				backend.Notify(ch)
			}
			last, known = now, true
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
