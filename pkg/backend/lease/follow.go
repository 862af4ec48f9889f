package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// Timings of the watch behind Backend.Watch, as client-go's reflector has
// them: watches last five to ten minutes; one that the server ends in
// under a second without an event counts as failed; failures back off from
// 0.8s, doubling, to 30s, each wait stretched by up to 100% jitter.
const (
	minWatchTimeout = 5 * time.Minute
	shortWatch      = time.Second
)

func newBackoff() wait.Backoff {
	return wait.Backoff{Duration: 800 * time.Millisecond, Factor: 2, Jitter: 1, Steps: math.MaxInt32, Cap: 30 * time.Second}
}

// follower is one watch loop: it follows the Leases its field selector
// picks (one Lease by name, or every Lease of the namespace) and hands
// each one it sees, in the order the API server sent them, to its sink.
// Both kinds of watch (a Backend's own, and the namespace's shared one)
// are this loop; they differ only in selector and sink.
type follower struct {
	leases *kubeclient.Leases
	// selector is the field selector of every request ("" for all).
	selector string
	// what names the watched Leases in logs ("the Lease"), errPrefix in
	// errors ("lease <namespace>/<name>", as Backend.errorf).
	what, errPrefix string
	log             *slog.Logger
	// beforeWatch, when it returns a hook, runs it before every watch
	// request (see Backend.beforeWatch).
	beforeWatch func() func(*metav1.ListOptions) error
	sink        sink
	// rv is the resourceVersion to resume from; "" starts over from the
	// Leases' current state.
	rv string
}

// sink receives what a follower sees, from its goroutine alone.
type sink interface {
	// saw: l was added or modified, or is part of the current state sent
	// when the watch starts over.
	saw(l *coordinationv1.Lease)
	// deleted: l was deleted.
	deleted(l *coordinationv1.Lease)
	// synced: the watch started over, and every Lease of the current
	// state has now been passed to saw; present holds their names. A
	// Lease not in present is gone, and a change may have been missed.
	synced(present map[string]bool)
	// streaming: true once a watch is open that follows on from a whole
	// state already passed to the sink (after synced, or resuming from
	// its resourceVersion), so what the sink holds is as current as the
	// stream; false when that watch ends, and until the next one is open
	// (or, after a start over, until synced).
	streaming(on bool)
}

// run watches until ctx ends, backing off after each failure.
func (f *follower) run(ctx context.Context) {
	backoff := newBackoff()
	for ctx.Err() == nil {
		err := f.watchOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			backoff = newBackoff()
			continue
		}
		pause := backoff.Step()
		f.log.Warn("watching "+f.what+" failed; retrying", "in", pause.Round(time.Millisecond), "err", err)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// watchOnce opens one watch and follows it until it ends. A nil error
// means the watch ran as it should and the next one may start at once.
func (f *follower) watchOnce(ctx context.Context) error {
	initial := f.rv == ""
	opts := metav1.ListOptions{ResourceVersion: f.rv}
	if initial {
		opts.SendInitialEvents = ptr.To(true)
		opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	}
	w, err := f.open(ctx, opts)
	var status apierrors.APIStatus
	switch {
	case err == nil:
	case !initial && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)):
		f.rv = "" // start over, at once
		return nil
	case initial && errors.As(err, &status):
		f.log.Warn("the API server refused a streaming watch of "+f.what+"; listing instead", "err", err)
		if err := f.list(ctx); err != nil {
			return err
		}
		initial = false
		if w, err = f.open(ctx, metav1.ListOptions{ResourceVersion: f.rv}); err != nil {
			return err
		}
	default:
		return err
	}
	defer w.Stop()
	return f.follow(ctx, w, initial)
}

// open starts a watch of the selected Leases, with bookmarks, for five to
// ten minutes.
func (f *follower) open(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.FieldSelector = f.selector
	opts.AllowWatchBookmarks = true
	opts.TimeoutSeconds = ptr.To(int64(minWatchTimeout.Seconds() * (1 + rand.Float64())))
	if hook := f.beforeWatch(); hook != nil {
		if err := hook(&opts); err != nil {
			return nil, err
		}
	}
	return f.leases.Watch(ctx, opts)
}

// list reads the selected Leases with a list, the fallback of a refused
// streaming watch, and hands them to the sink as the current state.
func (f *follower) list(ctx context.Context) error {
	list, err := f.leases.List(ctx, metav1.ListOptions{FieldSelector: f.selector})
	if err != nil {
		return fmt.Errorf("%s: list: %w", f.errPrefix, err)
	}
	f.rv = list.ResourceVersion
	present := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		present[list.Items[i].Name] = true
		f.sink.saw(&list.Items[i])
	}
	f.sink.synced(present)
	return nil
}

// follow reads w's events until it ends. In the initial phase of a
// streaming watch (the Leases' current state), resourceVersions are not
// kept: the phase ends with a bookmark that carries the version to resume
// from, and a watch cut off before it starts over.
func (f *follower) follow(ctx context.Context, w watch.Interface, initial bool) error {
	defer f.sink.streaming(false)
	if !initial {
		f.sink.streaming(true)
	}
	began, events := time.Now(), 0
	present := map[string]bool{} // the Leases of the initial phase
	for {
		var ev watch.Event
		var open bool
		select {
		case <-ctx.Done():
			return nil
		case ev, open = <-w.ResultChan():
		}
		if !open {
			if events == 0 && time.Since(began) < shortWatch {
				return errors.New("the API server ended the watch at once")
			}
			return nil
		}
		events++
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				f.rv = ""
				return nil
			}
			return fmt.Errorf("watch: %w", err)
		}
		l, ok := ev.Object.(*coordinationv1.Lease)
		if !ok {
			return fmt.Errorf("watch: unexpected %T in a %s event", ev.Object, ev.Type)
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			if initial {
				present[l.Name] = true
			}
			f.sink.saw(l)
		case watch.Deleted:
			f.sink.deleted(l)
		case watch.Bookmark:
			if initial && l.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
				initial = false
				f.sink.synced(present)
				f.sink.streaming(true)
			}
		}
		if !initial {
			f.rv = l.ResourceVersion
		}
	}
}
