package lease

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/leader-sidecar/leader-sidecar/internal/kubetest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// expectSignal fails t unless ch signals within d.
func expectSignal(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("%s: watch channel closed", what)
		}
	case <-time.After(d):
		t.Fatalf("%s: no signal within %v", what, d)
	}
}

// drain discards a pending signal.
func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// watchedPair returns a watching Backend (after its first signal, from the
// initial list) and a writer on the same existing Lease.
func watchedPair(t *testing.T, name string, tweak func(*Backend)) (ch <-chan struct{}, writer *Backend, v backend.Version) {
	t.Helper()
	ns := newNamespace(t)
	client := newClient(t)
	writer = newBackend(t, client, ns, name)
	v, err := writer.Create(ctxFor(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	watcher := newBackend(t, client, ns, name)
	if tweak != nil {
		tweak(watcher)
	}
	ch = watcher.Watch(t.Context())
	expectSignal(t, ch, 10*time.Second, "initial list")
	return ch, writer, v
}

// update writes a new record from v and returns the new version.
func update(t *testing.T, b *Backend, v backend.Version, token int64) backend.Version {
	t.Helper()
	v, err := b.Update(ctxFor(t), v, backendtest.SampleRecord("w", token))
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	return v
}

// shortWatches makes the API server end each of b's watch requests after
// two seconds (a watch under a second with no events counts as broken),
// and counts them.
func shortWatches(b *Backend, count *atomic.Int64) {
	b.beforeWatch = func(opts *metav1.ListOptions) error {
		count.Add(1)
		opts.TimeoutSeconds = ptr.To[int64](2)
		return nil
	}
}

// refuseStreamingWatch is a beforeWatch that refuses the streaming watch
// (sendInitialEvents), as an API server without it does, and counts the
// refusals.
func refuseStreamingWatch(refused *atomic.Int64) func(*metav1.ListOptions) error {
	return func(opts *metav1.ListOptions) error {
		if opts.SendInitialEvents != nil {
			refused.Add(1)
			return apierrors.NewBadRequest("sendInitialEvents is not supported (injected)")
		}
		return nil
	}
}

// watchFaults cuts watches off: while blocked, every watch request fails
// as an unreachable server's would (each failure sent on refusing), and
// once expired is set the next request fails with 410 Gone, so the watch
// starts over.
type watchFaults struct {
	blocked, expired atomic.Bool
	refusing         chan struct{}
}

func newWatchFaults() *watchFaults { return &watchFaults{refusing: make(chan struct{}, 100)} }

// around is a beforeWatch that applies the faults, then next.
func (f *watchFaults) around(next func(*metav1.ListOptions) error) func(*metav1.ListOptions) error {
	return func(opts *metav1.ListOptions) error {
		switch {
		case f.expired.CompareAndSwap(true, false):
			return apierrors.NewResourceExpired("too old resource version (injected)")
		case f.blocked.Load():
			f.refusing <- struct{}{}
			return errors.New("unreachable (injected)")
		}
		return next(opts)
	}
}

// TestWatchReestablishedAfterServerTimeout: the API server ends every
// watch request after two seconds; the watch resumes from where it was,
// without a list (so without a spurious signal), and a later change still
// signals.
func TestWatchReestablishedAfterServerTimeout(t *testing.T) {
	var watches atomic.Int64
	ch, writer, v := watchedPair(t, "watch-timeout", func(b *Backend) { shortWatches(b, &watches) })
	select {
	case <-ch:
		t.Fatal("signal while nothing changed: the watch was listed again instead of resumed")
	case <-time.After(4500 * time.Millisecond):
	}
	if n := watches.Load(); n < 3 {
		t.Fatalf("%d watch requests in 4.5s of two-second watches, want at least 3", n)
	}
	update(t, writer, v, 2)
	expectSignal(t, ch, 10*time.Second, "update after the server closed the watch twice")
}

// TestWatchSignalsAfterRelist: when a watch cannot resume (410 Gone: its
// resourceVersion was compacted away), the watch starts over from the
// Lease's current state, and the backend signals although nothing changed,
// since a change may have been missed.
func TestWatchSignalsAfterRelist(t *testing.T) {
	var watches atomic.Int64
	var gone atomic.Bool
	ch, _, _ := watchedPair(t, "watch-relist", func(b *Backend) {
		shortWatches(b, &watches)
		next := b.beforeWatch
		b.beforeWatch = func(opts *metav1.ListOptions) error {
			if gone.CompareAndSwap(true, false) {
				return apierrors.NewResourceExpired("too old resource version (injected)")
			}
			return next(opts)
		}
	})
	gone.Store(true) // the next watch request, within two seconds, fails
	expectSignal(t, ch, 15*time.Second, "relist after 410 Gone")
	if gone.Load() {
		t.Fatal("signal before the failing watch request")
	}
}

// TestWatchSurvivesAPIServerRestart stops and restarts envtest's
// kube-apiserver (etcd keeps the data): the watch comes back by itself.
func TestWatchSurvivesAPIServerRestart(t *testing.T) {
	ch, writer, v := watchedPair(t, "watch-restart", nil)
	api := testEnv.ControlPlane.GetAPIServer()
	began := time.Now()
	stopErr := api.Stop()
	if err := api.Start(); err != nil { // even after a failed stop: later tests need it
		t.Fatalf("restarting kube-apiserver: %v (stopping: %v)", err, stopErr)
	}
	if stopErr != nil {
		t.Fatalf("stopping kube-apiserver: %v", stopErr)
	}
	t.Logf("kube-apiserver restarted in %v", time.Since(began).Round(time.Millisecond))
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, err := writer.Get(ctxFor(t))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("API server unreachable after the restart: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The first signal may come from the watch starting over after the
	// restart rather than from the update (they coalesce); the second
	// update's signal can only come from the re-established watch. The
	// watch backs off (up to 30-60s) while the server is down.
	drain(ch)
	v = update(t, writer, v, 2)
	expectSignal(t, ch, 60*time.Second, "first update after the API server restarted")
	t.Logf("signal %v after the restart began", time.Since(began).Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond)
	drain(ch)
	update(t, writer, v, 3)
	expectSignal(t, ch, 10*time.Second, "second update after the API server restarted")
}

// TestWatchSignalsDeleteAndRecreate: deleting the Lease and creating it
// again both signal.
func TestWatchSignalsDeleteAndRecreate(t *testing.T) {
	ch, writer, _ := watchedPair(t, "watch-delete", nil)
	if err := admin.CoordinationV1().Leases(writer.namespace).Delete(ctxFor(t), writer.name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	expectSignal(t, ch, 10*time.Second, "delete")
	if _, err := writer.Create(ctxFor(t), backendtest.SampleRecord("b", 2)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	expectSignal(t, ch, 10*time.Second, "re-create")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestWatchIdleSendsNoRequests counts requests while nothing changes. The
// client's 300ms request timeout must not cut the watch either.
func TestWatchIdleSendsNoRequests(t *testing.T) {
	var requests atomic.Int64
	cfg := rest.CopyConfig(testCfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) { requests.Add(1); return rt.RoundTrip(r) })
	})
	client, err := kubeclient.NewClient(cfg, kubeclient.Options{Timeout: 300 * time.Millisecond, QPS: 100, Burst: 100})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	ns := newNamespace(t)
	b := newBackend(t, client, ns, "idle")
	v, err := b.Create(ctxFor(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	ch := b.Watch(t.Context())
	expectSignal(t, ch, 10*time.Second, "initial list")
	time.Sleep(500 * time.Millisecond) // let the watch request start
	before := requests.Load()
	time.Sleep(3 * time.Second)
	if n := requests.Load() - before; n != 0 {
		t.Fatalf("%d requests in 3s while idle, want none", n)
	}
	drain(ch)
	update(t, b, v, 2)
	expectSignal(t, ch, 10*time.Second, "update after 3s idle")
}

// TestWatchEndsOnClose: Close closes every watch channel and waits for the
// watches' goroutines; a Watch after Close is closed at once.
func TestWatchEndsOnClose(t *testing.T) {
	ns := newNamespace(t)
	before := goleak.IgnoreCurrent()
	b, err := New(Options{Client: newClient(t), Namespace: ns, Name: "close"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := b.Create(ctxFor(t), backendtest.SampleRecord("a", 1)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	chs := []<-chan struct{}{b.Watch(context.Background()), b.Watch(context.Background())}
	for _, ch := range chs {
		expectSignal(t, ch, 10*time.Second, "initial list")
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	chs = append(chs, b.Watch(context.Background()))
	for i, ch := range chs {
		for open := true; open; { // a pending signal may precede the close
			select {
			case _, open = <-ch:
			default:
				t.Fatalf("watch %d still open after Close returned", i)
			}
		}
	}
	goleak.VerifyNone(t, append(kubetest.IdleClientGoroutines(), before)...)
}

// TestWatchOfAMissingLeaseSignalsOnceListed: a first list that finds no
// Lease still signals, so a standby notices a Lease deleted before its
// watch began.
func TestWatchOfAMissingLeaseSignalsOnceListed(t *testing.T) {
	b := newBackend(t, newClient(t), newNamespace(t), "never-created")
	expectSignal(t, b.Watch(t.Context()), 10*time.Second, "first list of a missing Lease")
}
