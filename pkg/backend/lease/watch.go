package lease

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Watch implements backend.Backend. By default it watches this one Lease,
// with the field selector metadata.name=<name>, so no other object is
// transferred, and keeps no cache but the last Lease it saw (see
// Snapshot). With Options.SharedWatch, it subscribes to the watch of every
// Lease of the namespace that the process's Backends with SharedWatch on
// the same Client and namespace share (namespaceWatch): one watch request
// at a time however many Leases they are, at the cost of keeping the
// namespace's Leases in memory. Either way the signals below are this
// Lease's: another Lease's change does not signal.
//
// The watch first sends the current state (sendInitialEvents, as
// client-go's informers do), and Watch signals once this Lease's state is
// in, even when there is no Lease, so a standby notices a Lease deleted
// before its watch began; a Watch that joins a shared watch already
// running signals at once with the Lease as that watch last saw it. It
// then signals on every add, update or delete of this Lease; signals are
// coalesced.
//
// When the API server ends the watch (its timeout, a restart), it resumes
// from the last resourceVersion it saw, kept current by bookmarks, without
// a signal. When that version has expired (410 Gone), it starts over from
// the current state and signals, since a change may have been missed.
// When the API server refuses the streaming watch (a server without it, or
// no permission to watch), it lists (the Lease, or the namespace's Leases)
// and watches from the list's version instead, as client-go does. While
// the API server cannot be reached it backs off exponentially (from 0.8s,
// doubling, to 30-60s with jitter); the election's own polling covers
// that gap. There is no resync and no polling: while nothing changes, the
// only requests are the re-established watches, every five to ten
// minutes.
//
// The channel is closed, and Watch's goroutine is gone, once ctx is done
// or Close was called. A shared watch ends with the last Watch of it.
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
		if b.sharedWatch {
			b.watchShared(ctx, ch)
			return
		}
		f := &follower{
			leases:      b.leases,
			selector:    fields.OneTermEqualSelector("metadata.name", b.name).String(),
			what:        "the Lease",
			errPrefix:   "lease " + b.namespace + "/" + b.name,
			log:         b.log,
			beforeWatch: func() func(*metav1.ListOptions) error { return b.beforeWatch },
			sink:        ownLease{b: b, ch: ch},
		}
		f.run(ctx)
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

// see records l (nil: no Lease) as the Lease a Watch last saw.
func (b *Backend) see(l *coordinationv1.Lease) {
	b.latest.Store(l)
	if l != nil {
		b.known.put(l)
	}
}

// ownLease is the sink of a Backend's own watch of its Lease: every Lease
// it gets is this one.
type ownLease struct {
	b  *Backend
	ch chan struct{}
}

func (o ownLease) saw(l *coordinationv1.Lease) {
	o.b.see(l)
	backend.Notify(o.ch)
}

func (o ownLease) deleted(*coordinationv1.Lease) {
	o.b.see(nil)
	backend.Notify(o.ch)
}

func (o ownLease) synced(present map[string]bool) {
	if !present[o.b.name] {
		o.b.see(nil) // there is no Lease now
		backend.Notify(o.ch)
	}
}

func (ownLease) streaming(bool) {}
