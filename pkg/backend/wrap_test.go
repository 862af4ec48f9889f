package backend_test

import (
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
