package postgres_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/postgres"
)

// TestDeadConnectionsCostOneTimeout: the pool's connections, all opened
// over one path, go silently dead together (a dead peer, a dropped NAT
// entry: what is sent is lost, nothing is closed) while new connections
// work. The first request on a dead one times out; the pool then drops
// every idle connection it has, so the next request dials anew and
// succeeds. Otherwise each idle connection would cost a timeout of its
// own, and a leader with three would spend its renew deadline on them.
func TestDeadConnectionsCostOneTimeout(t *testing.T) {
	px := sidecartest.NewTCPProxy(t, filepath.Join(server.Server(t).SocketDir, ".s.PGSQL.5432"))
	b, err := postgres.Open(t.Context(), postgres.Options{URL: fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", px.Addr()),
		Table: "dead_conns", Election: "e", Signal: postgres.SignalPoll})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now()
	if _, err := b.Create(t.Context(), backend.Record{HolderIdentity: "a", LeaseDurationSeconds: 3, AcquireTime: now, RenewTime: now, Transitions: 1}); err != nil {
		t.Fatal(err)
	}
	// Requests at once, until the pool holds as many connections as it may.
	for range 50 {
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() { _, _, _ = b.Get(t.Context()) })
		}
		wg.Wait()
	}
	open := px.Forwarded.Load()
	px.Stall()
	failed := 0
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		_, _, err := b.Get(ctx)
		cancel()
		if err == nil {
			break
		}
		failed++
		if failed > 5 {
			t.Fatalf("%d requests failed after the stall, the last with %v", failed, err)
		}
	}
	t.Logf("%d connections opened before the stall (%d stalled); %d requests timed out before one succeeded", open, px.Stalled.Load(), failed)
	if failed > 1 {
		t.Errorf("%d requests timed out on dead connections before one dialled anew, want 1", failed)
	}
}
