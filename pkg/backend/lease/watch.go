package lease

import (
	"context"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Watch implements backend.Backend with a watch on this one Lease, the
// field selector metadata.name=<name>, so no other object is transferred.
// It keeps no cache but the last Lease it saw (see Snapshot).
//
// It opens a streaming watch that first sends the Lease's current state
// (sendInitialEvents, as client-go's informers do) and signals once that
// state is in, even when there is no Lease, so a standby notices a Lease
// deleted before its watch began. It then signals on every add, update or
// delete; signals are coalesced.
//
// When the API server ends the watch (its timeout, a restart), Watch
// resumes from the last resourceVersion it saw, kept current by bookmarks,
// without a signal. When that version has expired (410 Gone), it starts
// over from the current state and signals, since a change may have been
// missed. When the API server refuses the streaming watch (a server
// without it, or no permission to watch), it lists the Lease and watches
// from the list's version instead, as client-go does. While the API server
// cannot be reached it backs off exponentially (from 0.8s, doubling, to
// 30-60s with jitter); the election's own polling covers that gap. There
// is no resync and no polling: while nothing changes, the only requests
// are the re-established watches, every five to ten minutes.
//
// The channel is closed, and Watch's goroutine is gone, once ctx is done
// or Close was called.
func (b *Backend) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.closing, cancel)

	b.watchersMu.Lock()
	if b.closing.Err() != nil {
		b.watchersMu.Unlock()
		stop()
		cancel()
		close(ch)
		return ch
	}
	b.watchers.Add(1)
	b.watchersMu.Unlock()

	go func() {
		defer b.watchers.Done()
		defer close(ch)
		defer stop()
		defer cancel()
		(&follower{b: b, ch: ch}).run(ctx)
	}()
	return ch
}

// Snapshot implements backend.Snapshotter: the Lease as a Watch of this
// Backend last saw it, without a request. It is not ok before the first
// Watch has received the Lease, or after the Lease was deleted.
func (b *Backend) Snapshot() (backend.Record, backend.Version, bool) {
	l := b.latest.Load()
	if l == nil {
		return backend.Record{}, "", false
	}
	return recordFromLease(l), backend.Version(l.ResourceVersion), true
}
