package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// The backend speaks to the server through pgconn, pgx's wire-protocol
// layer, alone: parameters and results in text form, converted here. pgx's
// type system and pool would add megabytes to the sidecar's binary for
// five statements.

// conns is a small pool of connections for Get, Create, Update and List:
// at most poolConns open, idle ones kept. A connection that failed (the
// driver closed it) is dropped with every idle one; the next use opens a
// new one.
type conns struct {
	config *pgconn.Config
	slots  chan struct{} // a token per connection that may be open
	mu     sync.Mutex
	idle   []*pgconn.PgConn
	closed bool
}

func newConns(config *pgconn.Config, size int) *conns {
	return &conns{config: config, slots: make(chan struct{}, size)}
}

var errClosed = errors.New("the backend is closed")

// get returns an idle connection, or opens one when fewer than the pool's
// size are open, else waits for one to be put back.
func (p *conns) get(ctx context.Context) (*pgconn.PgConn, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.slots
		return nil, errClosed
	}
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	c, err := pgconn.ConnectConfig(ctx, p.config)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return c, nil
}

// put gives c back: kept if it still works, else closed. When the driver
// closed c (the request failed on it: a timeout, a reset), the idle
// connections are closed too: opened over the same path, they are likely
// dead the same way, and each would cost a request its timeout before the
// pool dials anew (a leader with three would spend its renew deadline on
// them).
func (p *conns) put(c *pgconn.PgConn) {
	var drop []*pgconn.PgConn
	p.mu.Lock()
	failed := c.IsClosed()
	keep := !p.closed && !failed && c.TxStatus() == 'I'
	switch {
	case keep:
		p.idle = append(p.idle, c)
	case failed:
		drop, p.idle = p.idle, nil
	}
	p.mu.Unlock()
	if !keep {
		_ = c.Close(context.Background())
	}
	if len(drop) > 0 {
		// A dead peer never answers the goodbye: not waited for long.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for _, d := range drop {
			_ = d.Close(ctx)
		}
	}
	<-p.slots
}

// close closes the idle connections; those in use are closed when put.
func (p *conns) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		_ = c.Close(context.Background())
	}
}

// query runs sql with args (text form; nil is NULL) on a connection of the
// pool and returns the rows, in text form.
func (p *conns) query(ctx context.Context, sql string, args ...[]byte) ([][][]byte, error) {
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	defer p.put(c)
	return run(ctx, c, sql, args...)
}

// durable raises the transaction's synchronous_commit to on unless it is
// on or remote_apply already: the commit then waits until the WAL is
// flushed on the server and, where synchronous_standby_names names
// standbys, on the synchronous standbys too, whatever the server's, the
// database's or the role's default (off, local or remote_write would
// acknowledge a write that a failover can lose). set_config(..., true)
// lasts until the end of the transaction.
const durable = `SELECT set_config('synchronous_commit', 'on', true)
	WHERE current_setting('synchronous_commit') NOT IN ('on', 'remote_apply')`

// write runs sql, a record write, with args on a connection of the pool,
// in one transaction with durable, so that its commit is acknowledged
// only once a failover to a synchronous standby cannot lose it. Both go
// in one round trip: the statements of a batch (a pipeline ended by one
// Sync) run in one implicit transaction.
func (p *conns) write(ctx context.Context, sql string, args ...[]byte) ([][][]byte, error) {
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	defer p.put(c)
	batch := &pgconn.Batch{}
	batch.ExecParams(durable, nil, nil, nil, nil)
	batch.ExecParams(sql, args, nil, nil, nil)
	results, err := c.ExecBatch(ctx, batch).ReadAll()
	if err != nil {
		return nil, err
	}
	for _, r := range results {
		if r.Err != nil {
			return nil, r.Err
		}
	}
	if len(results) != 2 {
		return nil, fmt.Errorf("a write answered %d results, want 2", len(results))
	}
	return results[1].Rows, nil
}

// run runs sql with args on c.
func run(ctx context.Context, c *pgconn.PgConn, sql string, args ...[]byte) ([][][]byte, error) {
	res := c.ExecParams(ctx, sql, args, nil, nil, nil).Read()
	return res.Rows, res.Err
}

// text is s as a parameter.
func text(s string) []byte { return []byte(s) }
