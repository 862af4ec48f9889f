package sqlite

import (
	"sync"
	"time"
)

// After a file-change notification, a watch reads PRAGMA data_version every
// followUpEvery until the value changes, for at most followUpFor. A
// notification can arrive before the commit it belongs to is visible:
// SQLite writes the frames to the -wal (the write is what inotify
// reports), syncs them, and only then publishes the commit in the -shm
// index, which is shared memory and reports nothing. The sync takes
// milliseconds, so one read at the notification would often miss the
// commit and leave it to the next PollInterval.
const (
	followUpEvery = time.Millisecond
	followUpFor   = 100 * time.Millisecond
)

// wakeups tells every active watch that the database or its -wal was
// written: each waits on the channel next returns, which notify closes
// (and replaces). No notification is lost: a watch takes the next channel
// before it reads data_version, so a write after that read closes the
// channel it holds.
type wakeups struct {
	mu sync.Mutex
	ch chan struct{}
}

// next returns the channel the next notification closes.
func (w *wakeups) next() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// notify wakes every watch waiting on next's channel.
func (w *wakeups) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}
