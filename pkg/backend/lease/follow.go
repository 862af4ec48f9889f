package lease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
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

// follower is one Watch's loop: it keeps Backend.latest in step with the
// Lease and signals ch on every change.
type follower struct {
	b  *Backend
	ch chan struct{}
	// rv is the resourceVersion to resume from; "" starts over from the
	// Lease's current state.
	rv string
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
		f.b.log.Warn("watching the Lease failed; retrying", "in", pause.Round(time.Millisecond), "err", err)
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
		f.b.log.Warn("the API server refused a streaming watch of the Lease; listing it instead", "err", err)
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

// open starts a watch of this Lease alone, with bookmarks, for five to
// ten minutes.
func (f *follower) open(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", f.b.name).String()
	opts.AllowWatchBookmarks = true
	opts.TimeoutSeconds = ptr.To(int64(minWatchTimeout.Seconds() * (1 + rand.Float64())))
	if f.b.beforeWatch != nil {
		if err := f.b.beforeWatch(&opts); err != nil {
			return nil, err
		}
	}
	return f.b.leases.Watch(ctx, opts)
}

// list reads the Lease with a list, the fallback of a refused streaming
// watch, and signals.
func (f *follower) list(ctx context.Context) error {
	list, err := f.b.leases.List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", f.b.name).String(),
	})
	if err != nil {
		return f.b.errorf("list", "%w", err)
	}
	f.rv = list.ResourceVersion
	if len(list.Items) == 0 {
		f.saw(nil)
	} else {
		f.saw(&list.Items[0])
	}
	return nil
}

// follow reads w's events until it ends. In the initial phase of a
// streaming watch (the Lease's current state), resourceVersions are not
// kept: the phase ends with a bookmark that carries the version to resume
// from, and a watch cut off before it starts over.
func (f *follower) follow(ctx context.Context, w watch.Interface, initial bool) error {
	began, events, sawLease := time.Now(), 0, false
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
			sawLease = true
			f.saw(l)
		case watch.Deleted:
			f.saw(nil)
		case watch.Bookmark:
			if initial && l.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
				initial = false
				if !sawLease {
					f.saw(nil) // there is no Lease now
				}
			}
		}
		if !initial {
			f.rv = l.ResourceVersion
		}
	}
}

// saw records l (nil: no Lease) as the latest state and signals.
func (f *follower) saw(l *coordinationv1.Lease) {
	f.b.latest.Store(l)
	if l != nil {
		f.b.known.put(l)
	}
	backend.Notify(f.ch)
}
