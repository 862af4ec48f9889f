package lease

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// listCounting is a client whose list requests of Leases (GETs of the
// collection that are not watches) are counted.
func listCounting(t *testing.T, lists *atomic.Int64) *kubeclient.Client {
	t.Helper()
	cfg := rest.CopyConfig(testCfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/leases") && !isWatch(r) {
				lists.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	c, err := kubeclient.NewClient(cfg, kubeclient.Options{Timeout: 10 * time.Second, QPS: 100, Burst: 100})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// isWatch reports whether r asks for a watch (client-go sends watch=true).
func isWatch(r *http.Request) bool { return r.URL.Query().Get("watch") == "true" }

// snapshotIs fails t unless b's snapshot shows rec at version v.
func snapshotIs(t *testing.T, b *Backend, rec backend.Record, v backend.Version) {
	t.Helper()
	got, gotV, ok := b.Snapshot()
	if !ok || gotV != v {
		t.Fatalf("snapshot at %q (ok %v), want %q", gotV, ok, v)
	}
	backendtest.AssertRecordEqual(t, got, rec)
}

// TestWatchStartsWithoutAList: the Lease's state comes over the watch
// itself, so a watch that starts sends no list, and the first signal
// comes with the snapshot in place.
func TestWatchStartsWithoutAList(t *testing.T) {
	var lists atomic.Int64
	b := newBackend(t, listCounting(t, &lists), newNamespace(t), "no-list")
	v, err := b.Create(ctxFor(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	expectSignal(t, b.Watch(t.Context()), 10*time.Second, "initial state")
	snapshotIs(t, b, backendtest.SampleRecord("a", 1), v)
	if n := lists.Load(); n != 0 {
		t.Fatalf("%d list requests to start a watch, want none", n)
	}
}

// TestWatchFallsBackToAList: an API server that refuses the streaming
// watch gets a list and a watch from the list's version instead, and
// changes still signal.
func TestWatchFallsBackToAList(t *testing.T) {
	var lists, refused atomic.Int64
	b := newBackend(t, listCounting(t, &lists), newNamespace(t), "fallback")
	b.beforeWatch = refuseStreamingWatch(&refused)
	v, err := b.Create(ctxFor(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	ch := b.Watch(t.Context())
	expectSignal(t, ch, 10*time.Second, "initial list")
	snapshotIs(t, b, backendtest.SampleRecord("a", 1), v)
	if refused.Load() != 1 || lists.Load() != 1 {
		t.Fatalf("%d streaming watches refused, %d lists; want 1 and 1", refused.Load(), lists.Load())
	}
	v = update(t, b, v, 2)
	expectSignal(t, ch, 10*time.Second, "update after the fallback")
	snapshotIs(t, b, backendtest.SampleRecord("w", 2), v)
}

// TestWatchStartingOverSeesADeletionItMissed: the Lease is deleted while
// the watch cannot resume; once its version has expired, the watch starts
// over, signals, and the snapshot shows no Lease.
func TestWatchStartingOverSeesADeletionItMissed(t *testing.T) {
	ns, name := newNamespace(t), "missed-delete"
	client := newClient(t)
	if _, err := newBackend(t, client, ns, name).Create(ctxFor(t), backendtest.SampleRecord("a", 1)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	var watches atomic.Int64
	var blocked, expired atomic.Bool
	refusing := make(chan struct{}, 100)
	watcher := newBackend(t, client, ns, name)
	shortWatches(watcher, &watches)
	next := watcher.beforeWatch
	watcher.beforeWatch = func(opts *metav1.ListOptions) error {
		switch {
		case expired.CompareAndSwap(true, false):
			return apierrors.NewResourceExpired("too old resource version (injected)")
		case blocked.Load():
			refusing <- struct{}{}
			return errors.New("unreachable (injected)")
		}
		return next(opts)
	}
	ch := watcher.Watch(t.Context())
	expectSignal(t, ch, 10*time.Second, "initial state")
	if _, _, ok := watcher.Snapshot(); !ok {
		t.Fatal("no snapshot of the Lease")
	}

	blocked.Store(true)
	select {
	case <-refusing: // the open watch has ended and could not resume
	case <-time.After(10 * time.Second):
		t.Fatal("the watch never tried to resume")
	}
	if err := admin.CoordinationV1().Leases(ns).Delete(ctxFor(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	select {
	case <-ch:
		t.Fatal("signal while the watch was cut off")
	default:
	}
	expired.Store(true)
	blocked.Store(false)
	expectSignal(t, ch, 15*time.Second, "starting over after the deletion")
	if _, v, ok := watcher.Snapshot(); ok {
		t.Fatalf("snapshot at %q after the Lease was deleted", v)
	}
}
