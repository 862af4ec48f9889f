package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// processFile is what the Backends of this process open on one database
// file (the same file, as os.SameFile says) share, whatever their
// elections:
//
//   - the watch of the file (watch.go): one connection that polls it while
//     any of them watches, whose connections open through the identity
//     check (connect) of a Backend still attached;
//   - the writers' turn (writeTurn): one write transaction of theirs at a
//     time, taken in the order asked, so that a shard group's writers queue
//     in the process instead of retrying SQLite's lock on their own.
type processFile struct {
	path string
	file os.FileInfo
	db   *sql.DB // watchPool connections, closed with the last Backend

	wakeups wakeups       // the file or its -wal was written (fswatch.go)
	writer  chan struct{} // capacity 1: held by the write transaction running

	mu       sync.Mutex
	backends map[*Backend]bool // attached: from Open to Close
	subs     map[*rowSubscription]bool
	stop     context.CancelFunc // ends the poll loop; nil while none runs
	polling  sync.WaitGroup     // the poll loops started
	poke     chan struct{}      // capacity 1: a new subscription wants its starting value
}

// processFiles holds every processFile of the process, by path.
var processFiles struct {
	sync.Mutex
	byPath map[string][]*processFile
}

// attach gives b, whose file is now known, what the process shares of
// the file, made if nothing is.
func (b *Backend) attach() error {
	processFiles.Lock()
	defer processFiles.Unlock()
	for _, pf := range processFiles.byPath[b.path] {
		if os.SameFile(pf.file, b.file) {
			pf.mu.Lock()
			pf.backends[b] = true
			pf.mu.Unlock()
			b.shared = pf
			return nil
		}
	}
	pf := &processFile{path: b.path, file: b.file, backends: map[*Backend]bool{b: true},
		subs: map[*rowSubscription]bool{}, poke: make(chan struct{}, 1), writer: make(chan struct{}, 1)}
	base, err := newConnector(b.path, b.busyTimeout, watchPool)
	if err != nil {
		return err
	}
	pf.db = sql.OpenDB(watchConnector{Connector: base, pf: pf})
	// A watch's connection is closed, not pooled, when its loop ends or the
	// connection fails, so a failed connection is never handed out again.
	pf.db.SetMaxIdleConns(0)
	if processFiles.byPath == nil {
		processFiles.byPath = map[string][]*processFile{}
	}
	processFiles.byPath[b.path] = append(processFiles.byPath[b.path], pf)
	b.shared = pf
	return nil
}

// detach removes b, whose Watches and writes have ended; with the last
// Backend the watch ends and its connections close.
func (pf *processFile) detach(b *Backend) error {
	processFiles.Lock()
	pf.mu.Lock()
	delete(pf.backends, b)
	last := len(pf.backends) == 0
	pf.mu.Unlock()
	if last {
		list := processFiles.byPath[pf.path]
		for i, other := range list {
			if other == pf {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(processFiles.byPath, pf.path)
		} else {
			processFiles.byPath[pf.path] = list
		}
	}
	processFiles.Unlock()
	if !last {
		return nil
	}
	pf.polling.Wait() // the last subscription stopped the loop
	return pf.db.Close()
}

// watchConnector opens the watch's connections through the identity check
// of an attached Backend: each must be on the file the watch is of.
type watchConnector struct {
	driver.Connector
	pf *processFile
}

func (c watchConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c.pf.mu.Lock()
	var b *Backend
	for b = range c.pf.backends {
		break
	}
	c.pf.mu.Unlock()
	if b == nil {
		return nil, errors.New("no handle open on the file")
	}
	return b.connect(ctx, c.Connector)
}

// writeTurn waits for the process's other writers on the file to be done,
// in the order they asked (a channel's queue of senders), for at most
// wait, and returns the end of this one's turn. A write transaction holds
// the turn from BEGIN to its commit or rollback, so SQLite's busy handler,
// which retries on a timer with growing sleeps and favours no one, only
// ever arbitrates between processes.
func (pf *processFile) writeTurn(ctx context.Context, wait time.Duration) (done func(), err error) {
	select {
	case pf.writer <- struct{}{}:
		return func() { <-pf.writer }, nil
	default:
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case pf.writer <- struct{}{}:
		return func() { <-pf.writer }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, fmt.Errorf("database %s is locked: this process's other writes to it took longer than the busy timeout (%v)", pf.path, wait)
	}
}
