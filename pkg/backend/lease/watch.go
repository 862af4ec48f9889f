package lease

import (
	"context"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Watch implements backend.Backend with a client-go informer on this one
// Lease: a list and a watch restricted by the field selector
// metadata.name=<name>, so neither transfers other objects.
//
// Every add, update or delete the informer sees becomes a coalesced signal.
// The informer re-establishes the watch from the last resourceVersion when
// the API server ends it (timeouts, restarts), lists again when that
// version has expired (410 Gone), and backs off exponentially (from 0.8s,
// doubling, to 30-60s with jitter) while the API server cannot be reached;
// the election's own polling covers that gap. A fresh list reports the Lease
// again, so a change missed while disconnected still produces a signal. The
// first list signals once as well, even when it finds no Lease. There is no resync and no polling: while
// nothing changes, the only requests are the re-established watches, every
// five to ten minutes.
//
// The channel is closed, and the informer's goroutines are gone, once ctx
// is done or Close was called.
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

	var sawLease atomic.Bool
	seen := func(obj any) {
		sawLease.Store(true)
		if l, ok := obj.(*coordinationv1.Lease); ok {
			b.latest.Store(l)
			b.known.put(l)
		}
		backend.Notify(ch)
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: b.listWatch(),
		ObjectType:    &coordinationv1.Lease{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    seen,
			UpdateFunc: func(_, obj any) { seen(obj) },
			DeleteFunc: func(any) {
				b.latest.Store(nil)
				backend.Notify(ch)
			},
		},
	})
	go func() {
		defer b.watchers.Done()
		defer close(ch)
		defer stop()
		defer cancel()
		ran := make(chan struct{})
		go func() {
			defer close(ran)
			informer.RunWithContext(ctx)
		}()
		// A first list that found the Lease has signalled through the
		// handler; one that found none signals here, so that a Lease
		// deleted before the watch began is noticed too.
		if cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) && !sawLease.Load() {
			backend.Notify(ch)
		}
		// RunWithContext returns once the reflector and the handler loop
		// have ended, so no handler can signal on the closed channel.
		<-ran
	}()
	return ch
}

// Snapshot implements backend.Snapshotter: the Lease as a Watch of this
// Backend last saw it, without a request. It is not ok before the first
// Watch has listed the Lease, or after the Lease was deleted.
func (b *Backend) Snapshot() (backend.Record, backend.Version, bool) {
	l := b.latest.Load()
	if l == nil {
		return backend.Record{}, "", false
	}
	return recordFromLease(l), backend.Version(l.ResourceVersion), true
}

// listWatch lists and watches only this Backend's Lease.
func (b *Backend) listWatch() *cache.ListWatch {
	selector := fields.OneTermEqualSelector("metadata.name", b.name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return b.leases.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			if b.beforeWatch != nil {
				if err := b.beforeWatch(&opts); err != nil {
					return nil, err
				}
			}
			return b.leases.Watch(ctx, opts)
		},
	}
}
