package election

import (
	"io"
	"log/slog"
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
