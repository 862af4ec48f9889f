package sqlite

import (
	"context"
	"fmt"
	"os"
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

// TestPollerReconnects drives a file watch's poller by hand, for one
// election: a failed connection is an error, not a panic; the next poll
// reconnects and reports a change (one may have been missed); then only
// real writes are changes, and only writes to its own election's row: a
// write to another election of the file is none.
func TestPollerReconnects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	b, writer := openT(t, path, "e"), openT(t, path, "e")
	v, err := writer.Create(ctxT(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	p := &poller{db: b.shared.db}
	defer p.close()
	sub := &rowSubscription{election: "e"}
	poll := func(step string, want bool) {
		t.Helper()
		if _, err := p.poll(ctxT(t)); err != nil {
			t.Fatalf("%s: poll: %v", step, err)
		}
		changed := sub.see(p)
		p.fresh = false
		if changed != want {
			t.Fatalf("%s: poll reported changed=%v, want %v", step, changed, want)
		}
	}
	poll("first poll", true)
	poll("no write", false)

	_ = p.conn.Close() // the connection fails under the poller
	if _, err := p.poll(ctxT(t)); err == nil {
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

// manyHandles is more handles than Linux's default inotify instances per
// user (fs.inotify.max_user_instances, 128): a shard group's records.
const manyHandles = 200

// TestHandlesOnOneFileShareOneWatch: a process's handles on one file, one
// election each, as a shard group's are, all watch it through one
// connection and one directory watcher, and each is woken by its own row
// alone. Were each handle's watch its own, every Watch would add a
// connection to the file, and the handles past the system's inotify
// instances would warn that they cannot watch the directory.
func TestHandlesOnOneFileShareOneWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	handles := make([]*Backend, manyHandles)
	for i := range handles {
		handles[i] = openT(t, path, fmt.Sprintf("shard-%d", i))
		if w := handles[i].Warnings(); len(w) > 0 {
			t.Fatalf("handle %d: %v", i, w)
		}
	}
	file, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	onFile := func() int {
		n := 0
		for _, fi := range descriptors() {
			if os.SameFile(fi, file) {
				n++
			}
		}
		return n
	}
	before := onFile()
	changes := make([]<-chan struct{}, len(handles))
	for i, b := range handles {
		changes[i] = b.Watch(ctxT(t))
	}
	for i, ch := range changes {
		waitSignal(t, ch, 10*time.Second, fmt.Sprintf("baseline of watch %d", i))
	}
	if added := onFile() - before; added != 1 {
		t.Fatalf("%d watches opened %d descriptors of the file, want the one of a shared connection", len(changes), added)
	}
	if n := inotifyInstances(t); n > 1 {
		t.Fatalf("the process has %d inotify instances open, want one for every handle", n)
	}

	for _, i := range []int{7, 0, manyHandles - 1} {
		if _, err := handles[i].Create(ctxT(t), backendtest.SampleRecord("a", 1)); err != nil {
			t.Fatal(err)
		}
		waitSignal(t, changes[i], 10*time.Second, fmt.Sprintf("a write to shard-%d", i))
		for j, ch := range changes {
			select {
			case <-ch:
				t.Fatalf("a write to shard-%d woke the watch of shard-%d", i, j)
			default:
			}
		}
	}
}

// inotifyInstances counts the process's open inotify instances.
func inotifyInstances(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "anon_inode:inotify" {
			n++
		}
	}
	return n
}
