package election

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

const electionName = "rules"

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// harness drives candidates that share one memory store and one fake
// clock. Candidates never run their loop: each step calls attempt directly,
// so the test decides exactly when every store operation happens.
type harness struct {
	t          *testing.T
	clock      *clocktesting.FakeClock
	store      *memory.Store
	candidates map[string]*Elector
	handles    map[string]*hookedBackend
	observers  map[string]*recordingObserver
}

func newHarness(t *testing.T) *harness {
	return &harness{
		t:          t,
		clock:      clocktesting.NewFakeClock(epoch),
		store:      memory.NewStore(),
		candidates: map[string]*Elector{},
		handles:    map[string]*hookedBackend{},
		observers:  map[string]*recordingObserver{},
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func (h *harness) candidate(id string) *Elector {
	if e, ok := h.candidates[id]; ok {
		return e
	}
	handle := &hookedBackend{Backend: h.store.Open(electionName)}
	obs := &recordingObserver{}
	e, err := New(Config{
		Backend:  handle,
		Identity: id,
		Clock:    h.clock,
		Logger:   quietLogger(),
		Observer: obs,
	})
	if err != nil {
		h.t.Fatalf("New(%s): %v", id, err)
	}
	h.candidates[id], h.handles[id], h.observers[id] = e, handle, obs
	return e
}

func (h *harness) stored() (backend.Record, bool) {
	rec, _, err := h.store.Open(electionName).Get(h.t.Context())
	if err != nil {
		return backend.Record{}, false
	}
	return rec, true
}

// step is one action or check in a scenario.
type step func(h *harness)

func try(id string, wantHolds bool) step {
	return func(h *harness) {
		h.t.Helper()
		e := h.candidate(id)
		e.opMu.Lock()
		got := e.attempt(h.t.Context())
		e.opMu.Unlock()
		if got != wantHolds {
			h.t.Fatalf("%s attempt at +%v: holds=%v, want %v", id, h.clock.Since(epoch), got, wantHolds)
		}
	}
}

func advance(d time.Duration) step { return func(h *harness) { h.clock.Step(d) } }

func release(id string) step {
	return func(h *harness) {
		h.t.Helper()
		if _, err := h.candidate(id).Release(h.t.Context()); err != nil {
			h.t.Fatalf("%s Release: %v", id, err)
		}
	}
}

func deleteRecord() step { return func(h *harness) { h.store.Delete(electionName) } }

func storeFails(err error) step { return func(h *harness) { h.store.SetError(err) } }

// handEdit overwrites the record as an operator or another program would.
func handEdit(rec backend.Record) step {
	return func(h *harness) {
		h.t.Helper()
		b := h.store.Open(electionName)
		_, v, err := b.Get(h.t.Context())
		switch {
		case err == nil:
			_, err = b.Update(h.t.Context(), v, rec)
		default:
			_, err = b.Create(h.t.Context(), rec)
		}
		if err != nil {
			h.t.Fatalf("hand edit: %v", err)
		}
	}
}

func leads(id string, token int64) step {
	return func(h *harness) {
		h.t.Helper()
		s := h.candidate(id).Status()
		if !s.Leader || s.Token != token {
			h.t.Fatalf("%s at +%v: leader=%v token=%d, want leader with token %d",
				id, h.clock.Since(epoch), s.Leader, s.Token, token)
		}
		if want := s.ValidUntil.Sub(h.clock.Now()); want <= 0 {
			h.t.Fatalf("%s leads with validUntil %v in the past", id, s.ValidUntil)
		}
	}
}

func follows(id, holder string) step {
	return func(h *harness) {
		h.t.Helper()
		s := h.candidate(id).Status()
		if s.Leader || s.Token != 0 || !s.ValidUntil.IsZero() || s.Holder != holder {
			h.t.Fatalf("%s at +%v: %+v, want a follower seeing holder %q", id, h.clock.Since(epoch), s, holder)
		}
	}
}

func validFor(id string, d time.Duration) step {
	return func(h *harness) {
		h.t.Helper()
		if got := h.candidate(id).Status().ValidUntil; !got.Equal(h.clock.Now().Add(d)) {
			h.t.Fatalf("%s validUntil %v, want now+%v", id, got, d)
		}
	}
}

func storedAs(holder string, token int64) step {
	return func(h *harness) {
		h.t.Helper()
		rec, ok := h.stored()
		if !ok || rec.HolderIdentity != holder || rec.Transitions != token {
			h.t.Fatalf("stored record %+v (present=%v), want holder %q token %d", rec, ok, holder, token)
		}
	}
}

func repeat(n int, steps ...step) step {
	return func(h *harness) {
		for range n {
			for _, s := range steps {
				s(h)
			}
		}
	}
}

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
	// lostUpdateAnswer makes the next Update land but answer with this
	// error: a request cancelled or timed out after the store wrote it.
	lostUpdateAnswer error
}

func (b *hookedBackend) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	if hook := b.beforeUpdate; hook != nil {
		b.beforeUpdate = nil
		hook()
	}
	v, err := b.Backend.Update(ctx, prev, rec)
	if lost := b.lostUpdateAnswer; lost != nil && err == nil {
		b.lostUpdateAnswer = nil
		return "", lost
	}
	return v, err
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
func (o *recordingObserver) TermStarted(t TermStart) {
	gap := "none"
	if t.HasGap {
		gap = t.Gap.String()
	}
	o.add("term started token=%d gap=%s", t.Token, gap)
}
func (o *recordingObserver) TermEnded(t TermEnd) {
	o.add("term ended token=%d reason=%s", t.Token, t.Reason)
}
func (o *recordingObserver) TokenAnomaly(a TokenAnomaly, seen, highest int64) {
	o.add("%s seen=%d highest=%d", a, seen, highest)
}

func (o *recordingObserver) LeaseDurationBounded(holder string, declared, bound time.Duration) {
	o.add("lease-duration-bounded holder=%s declared=%v bound=%v", holder, declared, bound)
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

// nextUpdateLandsButFails makes id's next Update land in the store while
// id is told it failed with err.
func nextUpdateLandsButFails(id string, err error) step {
	return func(h *harness) {
		h.candidate(id)
		h.handles[id].lostUpdateAnswer = err
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
