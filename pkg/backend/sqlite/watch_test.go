package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// waitSignal fails t unless ch delivers a signal (not a close) within d, and
// returns how long it took.
func waitSignal(t *testing.T, ch <-chan struct{}, d time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("%s: watch channel closed, want a signal", what)
		}
	case <-time.After(d):
		t.Fatalf("%s: no signal within %v", what, d)
	}
	return time.Since(start)
}

// TestWatchSeesRelease: a standby watching the record learns of the
// leader's release, written by another handle, well within a second.
func TestWatchSeesRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	standby, leader := openT(t, path, "e"), openT(t, path, "e")
	v, err := leader.Create(ctxT(t), backendtest.SampleRecord("leader", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	changes := standby.Watch(ctxT(t))
	waitSignal(t, changes, 10*time.Second, "baseline") // the signal every watch starts with

	if _, err := leader.Update(ctxT(t), v, backend.Record{LeaseDurationSeconds: 15, Transitions: 1}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if took := waitSignal(t, changes, 10*time.Second, "release"); took >= time.Second {
		t.Fatalf("release signalled after %v, want well under a second (poll interval %v)", took, DefaultPollInterval)
	}
	if rec, _, err := standby.Get(ctxT(t)); err != nil || rec.HolderIdentity != "" {
		t.Fatalf("standby Get after the signal = %+v, %v; want the released record", rec, err)
	}
}

// TestWatchEndsOnClose: Close ends watches whose context is still live and
// their goroutines (goleak checks at exit); a Watch after Close is closed.
func TestWatchEndsOnClose(t *testing.T) {
	b, err := Open(ctxT(t), Options{Path: filepath.Join(t.TempDir(), "leader.db"), Election: "e"})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	watches := []<-chan struct{}{b.Watch(context.Background()), b.Watch(context.Background())}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	watches = append(watches, b.Watch(context.Background()))
	for i, ch := range watches {
		for open := true; open; {
			select {
			case _, open = <-ch: // drain a pending signal, if any
			case <-time.After(10 * time.Second):
				t.Fatalf("watch %d still open 10s after Close", i)
			}
		}
	}
}

// TestOpenDoesNotWrite: opening a handle on an existing file changes
// nothing in it, so it does not wake the other processes' watches.
func TestOpenDoesNotWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	if _, err := openT(t, path, "e").Create(ctxT(t), backendtest.SampleRecord("a", 1)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	conn := rawConn(t, path)
	dataVersion := func() int64 {
		var v int64
		if err := conn.QueryRowContext(ctxT(t), "PRAGMA data_version").Scan(&v); err != nil {
			t.Fatalf("data_version: %v", err)
		}
		return v
	}
	before := dataVersion()
	b := openT(t, path, "e")
	v := mustVersion(t, b)
	if after := dataVersion(); after != before {
		t.Fatalf("data_version went from %d to %d across Open and Get, want no write", before, after)
	}
	// A write from the new handle does change it, so the check above can fail.
	if _, err := b.Update(ctxT(t), v, backendtest.SampleRecord("b", 2)); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if after := dataVersion(); after == before {
		t.Fatalf("data_version stayed %d after an Update", after)
	}
}

func mustVersion(t *testing.T, b *Backend) backend.Version {
	t.Helper()
	_, v, err := b.Get(ctxT(t))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return v
}

// TestPollerReconnects drives one watch's poller by hand: a failed
// connection is an error, not a panic; the next poll reconnects and reports
// a change (one may have been missed); then only real writes are changes,
// and only writes to its own election's row: a write to another
// election of the file is none.
func TestPollerReconnects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	b, writer := openT(t, path, "e"), openT(t, path, "e")
	v, err := writer.Create(ctxT(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	p := &poller{db: b.watchDB, election: "e"}
	defer p.close()
	poll := func(step string, want bool) {
		t.Helper()
		_, changed, err := p.poll(ctxT(t))
		if err != nil {
			t.Fatalf("%s: poll: %v", step, err)
		}
		if changed != want {
			t.Fatalf("%s: poll reported changed=%v, want %v", step, changed, want)
		}
	}
	poll("first poll", true)
	poll("no write", false)

	_ = p.conn.Close() // the connection fails under the poller
	if _, _, err := p.poll(ctxT(t)); err == nil {
		t.Fatal("poll on a closed connection succeeded")
	}
	if p.conn != nil {
		t.Fatal("poller kept its failed connection")
	}
	poll("reconnect", true)
	poll("no write after reconnect", false)

	if _, err := writer.Update(ctxT(t), v, backendtest.SampleRecord("b", 2)); err != nil {
		t.Fatalf("Update: %v", err)
	}
	poll("after another handle's write", true)
	poll("no further write", false)

	if _, err := openT(t, path, "other").Create(ctxT(t), backendtest.SampleRecord("c", 1)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	poll("after a write to another election", false)
	if _, err := b.db.ExecContext(ctxT(t), `UPDATE leader_records SET holder = 'by hand' WHERE name = 'e'`); err != nil {
		t.Fatal(err)
	}
	poll("after an edit by hand that keeps the version", true)
}
