package lease

import (
	"context"
	"strings"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// namespaceWatch is the one watch of every Lease of a namespace that the
// Backends of this process with Options.SharedWatch, the same Client and
// the same namespace share. The same Client means the same API server,
// credentials and connections: Backends on different Clients never share,
// even of one server, since their permissions may differ.
//
// It runs one follower (the loop of a Backend's own watch, without a field
// selector) while any Watch subscribes, and keeps the namespace's Leases
// as it last saw them. Each subscription is one Watch call of one Backend
// on one Lease name, and is signalled only for that name: on its first
// state, on every add, update or delete of that Lease, and whenever the
// watch starts over. Everything a subscription gets comes from the one
// stream, in the API server's order, under mu, so the Lease a Backend's
// Snapshot returns never goes back to an older resourceVersion.
//
// While current, it also answers List for those Backends (listWatched)
// from what it has seen, without a request.
type namespaceWatch struct {
	key    namespaceKey
	leases *kubeclient.Leases

	mu sync.Mutex
	// subs are the subscriptions, by Lease name.
	subs  map[string]map[*subscription]bool
	count int
	// seen are the namespace's Leases as the watch last saw them, by name;
	// whole says the watch has seen a whole current state since it began,
	// so a Lease not in seen does not exist.
	seen  map[string]*coordinationv1.Lease
	whole bool
	// current says seen is the namespace's Leases as of the open watch:
	// a watch is open that follows on from a whole state seen passed to
	// it. It is false between watches, and from a start over until its
	// whole new state is in (seen then mixes the old state and the new).
	current bool
	stop    context.CancelFunc
	done    chan struct{} // closed when the follower has returned
}

// namespaceKey identifies a shared watch: one client, one namespace.
type namespaceKey struct {
	client    *kubeclient.Client
	namespace string
}

// subscription is one Watch of one Backend's Lease.
type subscription struct {
	b  *Backend
	ch chan struct{} // the Watch's channel: capacity 1, signals coalesce
}

// namespaceWatches holds the shared watches of the process that have a
// subscription.
var namespaceWatches struct {
	sync.Mutex
	byKey map[namespaceKey]*namespaceWatch
}

// watchShared subscribes ch to b's Lease on the namespace's shared watch
// until ctx ends.
func (b *Backend) watchShared(ctx context.Context, ch chan struct{}) {
	sub := &subscription{b: b, ch: ch}
	nw := subscribe(sub)
	<-ctx.Done()
	nw.unsubscribe(sub)
}

// subscribe adds sub to the shared watch of its Backend's namespace,
// started if none runs. sub gets its first signal at once if the watch
// already knows the Lease's state, else once the watch has it.
func subscribe(sub *subscription) *namespaceWatch {
	b := sub.b
	key := namespaceKey{client: b.client, namespace: b.namespace}
	namespaceWatches.Lock()
	defer namespaceWatches.Unlock()
	nw := namespaceWatches.byKey[key]
	if nw == nil {
		nw = &namespaceWatch{key: key, leases: b.leases, subs: map[string]map[*subscription]bool{},
			seen: map[string]*coordinationv1.Lease{}, done: make(chan struct{})}
		if namespaceWatches.byKey == nil {
			namespaceWatches.byKey = map[namespaceKey]*namespaceWatch{}
		}
		namespaceWatches.byKey[key] = nw
		ctx, stop := context.WithCancel(context.Background())
		nw.stop = stop
		f := &follower{
			leases:      nw.leases,
			what:        "the namespace's Leases",
			errPrefix:   "leases of namespace " + b.namespace,
			log:         b.namespaceLog,
			beforeWatch: nw.beforeWatch,
			sink:        nw,
		}
		go func() {
			defer close(nw.done)
			f.run(ctx)
		}()
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.subs[b.name] == nil {
		nw.subs[b.name] = map[*subscription]bool{}
	}
	nw.subs[b.name][sub] = true
	nw.count++
	if l, ok := nw.seen[b.name]; ok || nw.whole {
		sub.deliver(l)
	}
	return nw
}

// unsubscribe removes sub; with the last subscription the watch stops,
// and unsubscribe returns once its follower has.
func (nw *namespaceWatch) unsubscribe(sub *subscription) {
	namespaceWatches.Lock()
	nw.mu.Lock()
	name := sub.b.name
	delete(nw.subs[name], sub)
	if len(nw.subs[name]) == 0 {
		delete(nw.subs, name)
	}
	nw.count--
	last := nw.count == 0
	nw.mu.Unlock()
	if last {
		delete(namespaceWatches.byKey, nw.key)
		nw.stop()
	}
	namespaceWatches.Unlock()
	if last {
		<-nw.done
	}
}

// beforeWatch is the test hook (Backend.beforeWatch) of a subscribed
// Backend that has one, if any.
func (nw *namespaceWatch) beforeWatch() func(*metav1.ListOptions) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for _, subs := range nw.subs {
		for sub := range subs {
			if sub.b.beforeWatch != nil {
				return sub.b.beforeWatch
			}
		}
	}
	return nil
}

// deliver records l (nil: no Lease) as the Lease sub's Backend last saw,
// and signals sub.
func (sub *subscription) deliver(l *coordinationv1.Lease) {
	sub.b.see(l)
	backend.Notify(sub.ch)
}

func (nw *namespaceWatch) saw(l *coordinationv1.Lease) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.seen[l.Name] = l
	for sub := range nw.subs[l.Name] {
		sub.deliver(l)
	}
}

func (nw *namespaceWatch) deleted(l *coordinationv1.Lease) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	delete(nw.seen, l.Name)
	for sub := range nw.subs[l.Name] {
		sub.deliver(nil)
	}
}

func (nw *namespaceWatch) streaming(on bool) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.current = on && nw.whole
}

// synced forgets the Leases that are gone and signals every subscription
// whose Lease is not in present: those that were in saw signalled there,
// so after a start over every subscription has had a signal.
func (nw *namespaceWatch) synced(present map[string]bool) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.whole = true
	for name := range nw.seen {
		if !present[name] {
			delete(nw.seen, name)
		}
	}
	for name, subs := range nw.subs {
		if present[name] {
			continue
		}
		for sub := range subs {
			sub.deliver(nil)
		}
	}
}

// listWatched is List answered from the shared watch of key's namespace:
// the Leases whose names begin with prefix as the watch has seen them,
// sorted by name. ok is false unless that watch runs and is current; the
// answer is then one state of the stream, never parts of two.
func listWatched(key namespaceKey, prefix string) (out []backend.Listed, ok bool) {
	namespaceWatches.Lock()
	nw := namespaceWatches.byKey[key]
	namespaceWatches.Unlock()
	if nw == nil {
		return nil, false
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if !nw.current {
		return nil, false
	}
	for name, l := range nw.seen {
		if strings.HasPrefix(name, prefix) {
			out = append(out, listed(l))
		}
	}
	sortListed(out)
	return out, true
}
