package fencesuite_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// The split brain with real sidecars (the binary, on one SQLite file):
// replica A leads and writes to every store with the term its sidecar
// handed out; A's sidecar is frozen with SIGSTOP (its application holds the
// term through the pause); B's sidecar takes over and B writes with its new
// term; A is resumed and writes with the term it still holds. Every store's
// documented guard refuses A's write and keeps B's.
func TestDocumentedGuardsRefuseARealPausedLeader(t *testing.T) {
	guards := make(map[string]docGuard)
	for _, s := range guardedStores {
		guards[s.name] = s.open(t)
	}
	all := sidecartest.StartMany(t, sidecartest.DBPath(t), 2)
	a, token := sidecartest.AwaitSettledLeader(t, all, 10*time.Second)
	b := sidecartest.Without(all, a)[0]
	termA := fence.TermID{Token: token, Holder: sidecartest.IdentityOf(t, a)}
	ctx := t.Context()
	for name, g := range guards {
		if err := g.write(ctx, "report", termA, "A before the pause"); err != nil {
			t.Fatalf("%s: A before the pause: %v", name, err)
		}
	}

	a.Signal(syscall.SIGSTOP)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = a.Cmd().Process.Signal(syscall.SIGCONT)
		}
	})
	sidecartest.AwaitToken(t, []*sidecartest.Sidecar{b}, token+1, 3*sidecartest.LeaseDuration)
	termB := fence.TermID{Token: token + 1, Holder: sidecartest.IdentityOf(t, b)}
	for name, g := range guards {
		if err := g.write(ctx, "report", termB, "B's result"); err != nil {
			t.Fatalf("%s: B, the new leader: %v", name, err)
		}
	}

	a.Signal(syscall.SIGCONT)
	resumed = true
	for name, g := range guards {
		t.Run(name, func(t *testing.T) {
			checkGuardAnswer(t, g.write(ctx, "report", termA, "A after the pause"), termA, fence.ErrStaleToken)
			if value, accepted := g.state(t, "report"); value != "B's result" || accepted != termB {
				t.Fatalf("after A woke up: value %q, accepted %v; want B's result with %v", value, accepted, termB)
			}
		})
	}
}
