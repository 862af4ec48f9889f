package election

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// hookedBackend runs a hook inside the next Get, before the store reads:
// the request is in flight while the hook changes the world.
type hookedBackend struct {
	backend.Backend
	beforeGet func()
	// lostAnswer makes the next Create land but answer with this error:
	// a request that outlived its client's timeout.
	lostAnswer error
	// afterCreate runs once the next Create has landed, before it answers.
	afterCreate func()
	// beforeUpdate runs inside the next Update, before the store writes.
	beforeUpdate func()
}

func (b *hookedBackend) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	if hook := b.beforeUpdate; hook != nil {
		b.beforeUpdate = nil
		hook()
	}
	return b.Backend.Update(ctx, prev, rec)
}

func (b *hookedBackend) Create(ctx context.Context, rec backend.Record) (backend.Version, error) {
	return b.create(ctx, rec, b.Backend.Create)
}

func (b *hookedBackend) CreateFirst(ctx context.Context, rec backend.Record) (backend.Version, error) {
	return b.create(ctx, rec, b.Backend.(backend.FirstCreator).CreateFirst)
}

func (b *hookedBackend) create(ctx context.Context, rec backend.Record,
	create func(context.Context, backend.Record) (backend.Version, error)) (backend.Version, error) {
	v, err := create(ctx, rec)
	if hook := b.afterCreate; hook != nil {
		b.afterCreate = nil
		hook()
	}
	if lost := b.lostAnswer; lost != nil && err == nil {
		b.lostAnswer = nil
		return "", lost
	}
	return v, err
}

func (b *hookedBackend) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	if hook := b.beforeGet; hook != nil {
		b.beforeGet = nil
		hook()
	}
	return b.Backend.Get(ctx)
}

// recordingObserver remembers what the elector told it, as lines.
type recordingObserver struct {
	mu     sync.Mutex
	events []string
}

func (o *recordingObserver) add(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf(format, args...))
}

func (o *recordingObserver) LeadershipChanged(leading bool, token int64) {
	o.add("leading=%v token=%d", leading, token)
}
func (o *recordingObserver) RenewFailed(error) { o.add("renew failed") }
func (o *recordingObserver) TokenAnomaly(a TokenAnomaly, seen, highest int64) {
	o.add("%s seen=%d highest=%d", a, seen, highest)
}

func (o *recordingObserver) count(event string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, e := range o.events {
		if e == event {
			n++
		}
	}
	return n
}

func (o *recordingObserver) has(event string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Contains(o.events, event)
}

// duringNextGet runs steps while id's next Get is in flight, before the
// store answers it.
func duringNextGet(id string, steps ...step) step {
	return func(h *harness) {
		h.candidate(id)
		h.handles[id].beforeGet = func() {
			for _, s := range steps {
				s(h)
			}
		}
	}
}

// duringNextUpdate runs steps while id's next Update is in flight, before
// the store writes it.
func duringNextUpdate(id string, steps ...step) step {
	return func(h *harness) {
		h.candidate(id)
		h.handles[id].beforeUpdate = func() {
			for _, s := range steps {
				s(h)
			}
		}
	}
}

// duringNextCreate runs steps after id's next Create has landed, before
// its answer arrives.
func duringNextCreate(id string, steps ...step) step {
	return func(h *harness) {
		h.candidate(id)
		h.handles[id].afterCreate = func() {
			for _, s := range steps {
				s(h)
			}
		}
	}
}

// nextCreateLandsButFails makes id's next Create land in the store while
// id is told it failed.
func nextCreateLandsButFails(id string) step {
	return func(h *harness) {
		h.candidate(id)
		h.handles[id].lostAnswer = errors.New("request timed out")
	}
}

// observed checks that id's observer was told event.
func observed(id, event string) step {
	return func(h *harness) {
		h.t.Helper()
		h.candidate(id)
		if o := h.observers[id]; !o.has(event) {
			h.t.Fatalf("%s's observer was not told %q; it was told %q", id, event, o.events)
		}
	}
}

// observedTimes checks that id's observer was told event exactly n times.
func observedTimes(id, event string, n int) step {
	return func(h *harness) {
		h.t.Helper()
		h.candidate(id)
		if got := h.observers[id].count(event); got != n {
			h.t.Fatalf("%s's observer was told %q %d times, want %d; it was told %q", id, event, got, n, h.observers[id].events)
		}
	}
}
