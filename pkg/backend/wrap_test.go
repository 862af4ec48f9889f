package backend_test

import (
	"context"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

type outer struct{ backend.Backend }

type lossy struct {
	backend.Backend
	lost chan struct{}
}

func (l lossy) Lost() <-chan struct{} { return l.lost }

type both struct{ lossy }

func (both) Snapshot() (backend.Record, backend.Version, bool) { return backend.Record{}, "7", true }

type firstOnly struct{ backend.Backend }

func (firstOnly) CreateFirst(context.Context, backend.Record) (backend.Version, error) {
	return "inner", nil
}

type outerFirst struct{ backend.Backend }

func (outerFirst) CreateFirst(context.Context, backend.Record) (backend.Version, error) {
	return "outer", nil
}

// CreateFirst is a request: a wrapper that has its own (to log or time
// it) is called; one without it passes the inner backend's through; and
// an inner backend without it gives none, whatever the wrapper has.
func TestWrappedPassesCreateFirstThroughTheWrapper(t *testing.T) {
	mem := memory.NewStore().Open("e")
	cases := []struct {
		name         string
		inner, outer backend.Backend
		want         backend.Version // "" if no FirstCreator
	}{
		{"wrapper with its own", firstOnly{mem}, outerFirst{firstOnly{mem}}, "outer"},
		{"wrapper without", firstOnly{mem}, outer{firstOnly{mem}}, "inner"},
		{"inner without", outer{mem}, outerFirst{outer{mem}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := backend.Wrapped(c.inner, c.outer)
			f, ok := w.(backend.FirstCreator)
			if ok != (c.want != "") {
				t.Fatalf("FirstCreator %v, want %v", ok, c.want != "")
			}
			if ok {
				if v, _ := f.CreateFirst(t.Context(), backend.Record{}); v != c.want {
					t.Fatalf("CreateFirst went to %q, want %q", v, c.want)
				}
			}
		})
	}
}

func TestWrappedKeepsExactlyTheInnerOptionalInterfaces(t *testing.T) {
	mem := memory.NewStore().Open("e")
	lost := make(chan struct{})
	cases := []struct {
		name           string
		inner          backend.Backend
		wantSnap, loss bool
	}{
		{"snapshots and loss", both{lossy{Backend: outer{mem}, lost: lost}}, true, true},
		{"with loss", lossy{Backend: outer{mem}, lost: lost}, false, true},
		{"plain", outer{mem}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := backend.Wrapped(c.inner, outer{c.inner})
			_, snap := w.(backend.Snapshotter)
			l, loss := w.(backend.LossNotifier)
			if snap != c.wantSnap || loss != c.loss {
				t.Fatalf("Snapshotter %v, LossNotifier %v; want %v, %v", snap, loss, c.wantSnap, c.loss)
			}
			if loss && l.Lost() != (<-chan struct{})(lost) {
				t.Fatal("Lost is not the inner backend's")
			}
			if s, ok := w.(backend.Snapshotter); ok {
				if _, v, _ := s.Snapshot(); v != "7" {
					t.Fatal("Snapshot is not the inner backend's")
				}
			}
		})
	}
}
