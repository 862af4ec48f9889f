package lease

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// watchCounting is a client whose watch requests of Leases are counted.
func watchCounting(t *testing.T, watches *atomic.Int64) *kubeclient.Client {
	t.Helper()
	cfg := rest.CopyConfig(testCfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, "/leases") && isWatch(r) {
				watches.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	c, err := kubeclient.NewClient(cfg, kubeclient.Options{Timeout: 10 * time.Second, QPS: 1000, Burst: 2000})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// newSharedBackend opens a Backend with SharedWatch and closes it when the
// test ends.
func newSharedBackend(t *testing.T, c *kubeclient.Client, ns, name string) *Backend {
	t.Helper()
	b, err := New(Options{Client: c, Namespace: ns, Name: name, SharedWatch: true})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// pending reports which of chs hold a signal, draining them.
func pending(chs []<-chan struct{}) []int {
	var out []int
	for i, ch := range chs {
		select {
		case <-ch:
			out = append(out, i)
		default:
		}
	}
	return out
}

// TestSharedWatchOneWatchForAShardGroup opens the Backends of a replica of
// a 64-shard group (64 shard Leases and its member Lease) in one namespace,
// first each watching its own Lease, then sharing: 65 watch requests
// before, 1 after. Each Backend's Watch and Snapshot stay its own: a
// change of one Lease signals its Backend alone; a deletion and a creation
// show in the right Backend only.
func TestSharedWatchOneWatchForAShardGroup(t *testing.T) {
	t.Parallel()
	const shards = 64
	ns := newNamespace(t)
	names := make([]string, 0, shards+1)
	for i := range shards {
		names = append(names, fmt.Sprintf("g-shard-%d", i))
	}
	member := shards // the member Lease, not created yet
	names = append(names, "g-member-replica-0")

	versions := make([]backend.Version, len(names))
	records := make([]backend.Record, len(names))
	writer := newClient(t)
	for i := range shards {
		records[i] = backendtest.SampleRecord(fmt.Sprint("holder-", i), int64(i+1))
		v, err := newBackend(t, writer, ns, names[i]).Create(ctxFor(t), records[i])
		if err != nil {
			t.Fatalf("Create %s: %v", names[i], err)
		}
		versions[i] = v
	}

	for _, shared := range []bool{false, true} {
		var watches atomic.Int64
		client := watchCounting(t, &watches)
		ctx, cancel := context.WithCancel(ctxFor(t))
		bs := make([]*Backend, len(names))
		chs := make([]<-chan struct{}, len(names))
		for i, name := range names {
			if shared {
				bs[i] = newSharedBackend(t, client, ns, name)
			} else {
				bs[i] = newBackend(t, client, ns, name)
			}
			chs[i] = bs[i].Watch(ctx)
		}
		for i, ch := range chs {
			expectSignal(t, ch, 20*time.Second, "first state of "+names[i])
		}
		for i := range shards {
			snapshotIs(t, bs[i], records[i], versions[i])
		}
		if _, v, ok := bs[member].Snapshot(); ok {
			t.Fatalf("snapshot at %q of a member Lease never created", v)
		}
		t.Logf("shared %v: %d Backends in one namespace made %d watch requests", shared, len(names), watches.Load())
		if !shared {
			if n := watches.Load(); n != int64(len(names)) {
				t.Fatalf("%d watch requests of %d Backends each watching its own Lease, want %d", n, len(names), len(names))
			}
			cancel()
			for _, b := range bs {
				_ = b.Close()
			}
			continue
		}
		if n := watches.Load(); n != 1 {
			t.Fatalf("%d watch requests of %d Backends sharing a watch, want 1", n, len(names))
		}

		// Update shard 5, then shard 9: once 9 signals, the stream has
		// delivered 5's change too; nobody else may have a signal.
		_ = pending(chs)
		versions[5] = update(t, bs[5], versions[5], 100)
		records[5] = backendtest.SampleRecord("w", 100)
		versions[9] = update(t, bs[9], versions[9], 101)
		records[9] = backendtest.SampleRecord("w", 101)
		expectSignal(t, chs[9], 10*time.Second, "update of "+names[9])
		if got := pending(chs); fmt.Sprint(got) != "[5]" {
			t.Fatalf("Backends %v signalled besides the updated %s, want [5]", got, names[9])
		}
		// Delete shard 7, then create the member Lease.
		if err := admin.CoordinationV1().Leases(ns).Delete(ctxFor(t), names[7], metav1.DeleteOptions{}); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		records[member] = backendtest.SampleRecord("member", 1)
		v, err := bs[member].Create(ctxFor(t), records[member])
		if err != nil {
			t.Fatalf("Create member: %v", err)
		}
		versions[member] = v
		expectSignal(t, chs[member], 10*time.Second, "creation of "+names[member])
		if got := pending(chs); fmt.Sprint(got) != "[7]" {
			t.Fatalf("Backends %v signalled besides the created member, want [7] (the deleted Lease)", got)
		}
		for i := range names {
			if i == 7 {
				if _, v, ok := bs[i].Snapshot(); ok {
					t.Fatalf("snapshot of the deleted %s at %q", names[i], v)
				}
				continue
			}
			snapshotIs(t, bs[i], records[i], versions[i])
		}
		if n := watches.Load(); n != 1 {
			t.Fatalf("%d watch requests after the changes, want still 1", n)
		}
		cancel()
	}
}

// TestSharedWatchStartsOverForEverySubscriber: the shared watch cannot
// resume while a Lease is deleted; once its version has expired it starts
// over, every Backend it serves gets a signal, the deleted Lease's
// snapshot shows no Lease, and the others' show theirs.
func TestSharedWatchStartsOverForEverySubscriber(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	client := newClient(t)
	names := []string{"over-a", "over-b", "over-missing"}
	bs := make([]*Backend, len(names))
	versions := make([]backend.Version, len(names))
	for i, name := range names {
		bs[i] = newSharedBackend(t, client, ns, name)
		if i < 2 {
			v, err := bs[i].Create(ctxFor(t), backendtest.SampleRecord(name, 1))
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			versions[i] = v
		}
	}
	// Every Backend has the hook, so the shared watch uses it whichever
	// Backend it asks.
	var watches atomic.Int64
	faults := newWatchFaults()
	for _, b := range bs {
		shortWatches(b, &watches)
		b.beforeWatch = faults.around(b.beforeWatch)
	}
	chs := make([]<-chan struct{}, len(names))
	for i, b := range bs {
		chs[i] = b.Watch(t.Context())
		expectSignal(t, chs[i], 10*time.Second, "first state of "+names[i])
	}
	snapshotIs(t, bs[1], backendtest.SampleRecord("over-b", 1), versions[1])

	faults.blocked.Store(true)
	select {
	case <-faults.refusing: // the open watch has ended and could not resume
	case <-time.After(10 * time.Second):
		t.Fatal("the watch never tried to resume")
	}
	if err := admin.CoordinationV1().Leases(ns).Delete(ctxFor(t), names[0], metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if got := pending(chs); len(got) != 0 {
		t.Fatalf("Backends %v signalled while the watch was cut off", got)
	}
	faults.expired.Store(true)
	faults.blocked.Store(false)
	for i, ch := range chs {
		expectSignal(t, ch, 15*time.Second, "starting over, "+names[i])
	}
	if _, v, ok := bs[0].Snapshot(); ok {
		t.Fatalf("snapshot at %q after the Lease was deleted", v)
	}
	snapshotIs(t, bs[1], backendtest.SampleRecord("over-b", 1), versions[1])
	if _, v, ok := bs[2].Snapshot(); ok {
		t.Fatalf("snapshot at %q of a Lease never created", v)
	}
	versions[1] = update(t, bs[1], versions[1], 2)
	expectSignal(t, chs[1], 10*time.Second, "update after starting over")
	snapshotIs(t, bs[1], backendtest.SampleRecord("w", 2), versions[1])
}

// TestSharedWatchFallsBackToAList: an API server that refuses the
// streaming watch gets one list of the namespace and one watch from its
// version, for every Backend.
func TestSharedWatchFallsBackToAList(t *testing.T) {
	t.Parallel()
	var lists, refused atomic.Int64
	client := listCounting(t, &lists)
	ns := newNamespace(t)
	a, b := newSharedBackend(t, client, ns, "fallback-a"), newSharedBackend(t, client, ns, "fallback-b")
	a.beforeWatch = refuseStreamingWatch(&refused)
	va, err := a.Create(ctxFor(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	cha := a.Watch(t.Context())
	expectSignal(t, cha, 10*time.Second, "first state of a")
	chb := b.Watch(t.Context())
	expectSignal(t, chb, 10*time.Second, "first state of b (missing)")
	snapshotIs(t, a, backendtest.SampleRecord("a", 1), va)
	if refused.Load() != 1 || lists.Load() != 1 {
		t.Fatalf("%d streaming watches refused, %d lists; want 1 and 1", refused.Load(), lists.Load())
	}
	vb, err := b.Create(ctxFor(t), backendtest.SampleRecord("b", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	expectSignal(t, chb, 10*time.Second, "creation of b after the fallback")
	snapshotIs(t, b, backendtest.SampleRecord("b", 1), vb)
	select {
	case <-cha:
		t.Fatal("a signalled for b's creation")
	default:
	}
}

// TestSharedWatchJoinAndLeave: a Watch that joins a running shared watch
// signals at once with its Lease as the watch saw it, without a request;
// the watch goes on while any Watch is left, ends with the last (no
// goroutine left behind), and a later Watch starts a new one. Backends on
// another client never share it.
func TestSharedWatchJoinAndLeave(t *testing.T) {
	ns := newNamespace(t)
	var watches, otherWatches atomic.Int64
	client := watchCounting(t, &watches)
	before := goleak.IgnoreCurrent()
	a := newSharedBackend(t, client, ns, "join-a")
	b := newSharedBackend(t, client, ns, "join-b")
	vb, err := b.Create(ctxFor(t), backendtest.SampleRecord("b", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	ctxA, cancelA := context.WithCancel(t.Context())
	cha := a.Watch(ctxA)
	expectSignal(t, cha, 10*time.Second, "first state of a")
	chb := b.Watch(t.Context())
	expectSignal(t, chb, time.Second, "b joining the running watch")
	snapshotIs(t, b, backendtest.SampleRecord("b", 1), vb)

	other := newSharedBackend(t, watchCounting(t, &otherWatches), ns, "join-b")
	cho := other.Watch(t.Context())
	expectSignal(t, cho, 10*time.Second, "first state on another client")
	if watches.Load() != 1 || otherWatches.Load() != 1 {
		t.Fatalf("%d and %d watch requests on two clients, want 1 and 1", watches.Load(), otherWatches.Load())
	}

	cancelA()
	for range cha { // closed once a's Watch has left
	}
	vb = update(t, b, vb, 2)
	expectSignal(t, chb, 10*time.Second, "b's update after a left")
	snapshotIs(t, b, backendtest.SampleRecord("w", 2), vb)
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := other.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	goleak.VerifyNone(t, append(kubetest.IdleClientGoroutines(), before)...)

	cha = a.Watch(t.Context())
	expectSignal(t, cha, 10*time.Second, "first state of a new shared watch")
	if n := watches.Load(); n != 2 {
		t.Fatalf("%d watch requests, want 2 (one per shared watch)", n)
	}
}

// TestSharedWatchSnapshotsNeverGoBack: while writers update eight Leases
// as fast as they can and the shared watch starts over every second (the
// API server ends each watch after a second, and every resume is refused
// as expired), every Backend's Snapshot is its own Lease (its holder names
// it), at a resourceVersion that never goes back, and ends at the Lease's
// last version.
func TestSharedWatchSnapshotsNeverGoBack(t *testing.T) {
	t.Parallel()
	const leases, startOvers = 8, 5
	ns := newNamespace(t)
	client := newClient(t)
	bs := make([]*Backend, leases)
	versions := make([]backend.Version, leases)
	var starts atomic.Int64
	for i := range bs {
		bs[i] = newSharedBackend(t, client, ns, fmt.Sprint("order-", i))
		v, err := bs[i].Create(ctxFor(t), backendtest.SampleRecord(fmt.Sprint("order-", i), 1))
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		versions[i] = v
	}
	for _, b := range bs {
		b.beforeWatch = func(opts *metav1.ListOptions) error {
			if opts.ResourceVersion != "" {
				return apierrors.NewResourceExpired("too old resource version (injected)")
			}
			starts.Add(1)
			opts.TimeoutSeconds = ptr.To[int64](1)
			return nil
		}
	}
	chs := make([]<-chan struct{}, leases)
	for i, b := range bs {
		chs[i] = b.Watch(t.Context())
	}
	var wg sync.WaitGroup
	stopSampling := make(chan struct{})
	failures := make(chan string, leases)
	for i, b := range bs {
		wg.Go(func() {
			var last uint64
			for {
				select {
				case <-stopSampling:
					return
				case <-chs[i]:
				case <-time.After(10 * time.Millisecond):
				}
				rec, v, ok := b.Snapshot()
				if !ok {
					continue
				}
				rv, err := strconv.ParseUint(string(v), 10, 64)
				if err != nil {
					failures <- fmt.Sprintf("%s: resourceVersion %q: %v", b.name, v, err)
					return
				}
				if rv < last {
					failures <- fmt.Sprintf("%s: snapshot went back from %d to %d", b.name, last, rv)
					return
				}
				if rec.HolderIdentity != b.name {
					failures <- fmt.Sprintf("%s: snapshot holds %q", b.name, rec.HolderIdentity)
					return
				}
				last = rv
			}
		})
	}
	giveUp := time.Now().Add(30 * time.Second)
	for round := 0; starts.Load() <= startOvers; round++ {
		if time.Now().After(giveUp) {
			t.Fatalf("%d watches started in 30s, want %d start-overs", starts.Load(), startOvers)
		}
		var writers sync.WaitGroup
		for i, b := range bs {
			writers.Go(func() {
				v, err := b.Update(ctxFor(t), versions[i], backendtest.SampleRecord(b.name, int64(round+2)))
				if err != nil {
					t.Errorf("Update %s: %v", b.name, err)
					return
				}
				versions[i] = v
			})
		}
		writers.Wait()
		if t.Failed() {
			break
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for i, b := range bs {
		for {
			_, v, ok := b.Snapshot()
			if ok && v == versions[i] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: snapshot at %q (ok %v), want the last version %q", b.name, v, ok, versions[i])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	close(stopSampling)
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	t.Logf("%d watches started over the %d Leases' writes", starts.Load(), leases)
}

// TestSharedWatchServesList: while the shared watch of the namespace runs
// and is current, List of a Backend with SharedWatch answers from it
// without a request, in the shape and order a list request gives, and
// follows creations, updates and deletions; before the watch runs, while
// it is cut off and after a start over until its new state is whole,
// List sends a list request; a Backend without SharedWatch always does.
func TestSharedWatchServesList(t *testing.T) {
	t.Parallel()
	var lists atomic.Int64
	client := listCounting(t, &lists)
	ns := newNamespace(t)
	member := newSharedBackend(t, client, ns, "grp-member-a")
	shard := newSharedBackend(t, client, ns, "grp-shard-0")
	plain := newBackend(t, client, ns, "grp-member-a")
	for _, b := range []*Backend{member, shard} {
		if _, err := b.Create(ctxFor(t), backendtest.SampleRecord(b.name, 1)); err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
	// listedNow is List's answer and the number of list requests it sent.
	listedNow := func(b *Backend) ([]backend.Listed, int64) {
		t.Helper()
		before := lists.Load()
		got, err := b.List(ctxFor(t), "grp-member-")
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		return got, lists.Load() - before
	}
	// settles waits until member's List answers without a request and
	// equals a list request's answer.
	settles := func(what string) []backend.Listed {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			got, sent := listedNow(member)
			want, _ := listedNow(plain)
			if sent == 0 && reflect.DeepEqual(got, want) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: List sent %d requests and answered %v, want no request and %v", what, sent, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	names := func(ls []backend.Listed) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.Name)
		}
		return out
	}

	if _, sent := listedNow(member); sent != 1 {
		t.Fatalf("List sent %d requests before any watch ran, want 1", sent)
	}

	faults := newWatchFaults()
	shortWatches(shard, new(atomic.Int64))
	shard.beforeWatch = faults.around(shard.beforeWatch)
	ch := shard.Watch(t.Context())
	expectSignal(t, ch, 10*time.Second, "first state of the shard")
	settles("the watch is whole")
	if _, sent := listedNow(plain); sent != 1 {
		t.Fatalf("List without SharedWatch sent %d requests, want 1", sent)
	}

	joined := newSharedBackend(t, newClient(t), ns, "grp-member-b")
	vb, err := joined.Create(ctxFor(t), backendtest.SampleRecord("b", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	got := settles("a member joined")
	if !slices.Equal(names(got), []string{"grp-member-a", "grp-member-b"}) || got[1].Version != vb {
		t.Fatalf("after a join, List = %v, want grp-member-a and grp-member-b at %s", got, vb)
	}
	vb = update(t, joined, vb, 2)
	if got = settles("a member renewed"); got[1].Version != vb || got[1].Record.HolderIdentity != "w" {
		t.Fatalf("after a renewal, List = %v, want grp-member-b at %s", got, vb)
	}

	faults.blocked.Store(true)
	select {
	case <-faults.refusing: // the open watch (two seconds long) has ended
	case <-time.After(10 * time.Second):
		t.Fatal("the watch never tried to resume")
	}
	if err := admin.CoordinationV1().Leases(ns).Delete(ctxFor(t), "grp-member-b", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	got, sent := listedNow(member)
	if sent != 1 || !slices.Equal(names(got), []string{"grp-member-a"}) {
		t.Fatalf("while the watch was cut off, List sent %d requests and answered %v, want 1 and grp-member-a alone", sent, got)
	}
	faults.expired.Store(true)
	faults.blocked.Store(false)
	expectSignal(t, ch, 15*time.Second, "starting over")
	if got = settles("after starting over"); !slices.Equal(names(got), []string{"grp-member-a"}) {
		t.Fatalf("after starting over, List = %v, want grp-member-a alone", got)
	}

	before := lists.Load()
	for range 20 {
		_, _ = listedNow(plain)
	}
	if n := lists.Load() - before; n != 20 {
		t.Fatalf("20 Lists without SharedWatch sent %d requests, want 20", n)
	}
}
