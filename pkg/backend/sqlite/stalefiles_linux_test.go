package sqlite

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// deleteMainFile removes the database alone, leaving SQLite's -wal and
// -shm beside it, as `rm leader.db` does.
func deleteMainFile(t *testing.T, path string) time.Time {
	t.Helper()
	start := time.Now()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	return start
}

// TestStaleFilesRemovedOnLoss: three backends hold leader.db open (its
// -wal and -shm with them); the file is replaced by another database, or
// deleted alone. Once they notice, by the watch or by a call, a backend
// opened on the path reads the file now there: the other database's
// record, or none, never the old file's record from its -wal. (The backends
// here share one process, whose own locks never block it: SQLite then
// discards an old -wal beside an empty new file by itself, so the
// deleted-alone cases pass without the removal too. Across processes the
// old -shm, still locked by the old ones, can mislead a new one; the e2e test
// TestSQLiteFileDeletedOrReplaced runs those.)
func TestStaleFilesRemovedOnLoss(t *testing.T) {
	cases := []struct {
		name    string
		lose    func(t *testing.T, path string) time.Time
		watcher bool
		want    string // holder read afterwards; "" for no record
	}{
		{"replaced/watch", replaceStore, true, "b"},
		{"replaced/call", replaceStore, false, "b"},
		{"deleted-alone/watch", deleteMainFile, true, ""},
		{"deleted-alone/call", deleteMainFile, false, ""},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "leader.db")
			first, _ := openLive(t, path, watcherFor(tt.watcher))
			olds := []*Backend{first}
			for range 2 {
				b, err := Open(ctxT(t), Options{Path: path, Election: "e", newWatcher: watcherFor(tt.watcher)})
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				t.Cleanup(func() { _ = b.Close() })
				olds = append(olds, b)
			}
			statSides(t, path) // the old file's -wal and -shm are there
			tt.lose(t, path)
			var wg sync.WaitGroup
			for _, b := range olds {
				wg.Go(func() { awaitLoss(t, b, tt.watcher) })
			}
			wg.Wait()

			rec, _, err := openT(t, path, "e").Get(ctxT(t))
			switch {
			case tt.want == "" && !errors.Is(err, backend.ErrNotFound):
				t.Fatalf("Get on the path after the loss = %+v, %v; want ErrNotFound (the old file's -wal was replayed)", rec, err)
			case tt.want != "" && (err != nil || rec.HolderIdentity != tt.want):
				t.Fatalf("Get on the path after the loss = holder %q, %v; want holder %q (the old file's -wal was replayed)",
					rec.HolderIdentity, err, tt.want)
			}
		})
	}
}

// TestStaleFilesKeepNewWAL: another old process removed the stale -wal
// and -shm, and a new process opened the new file and made its own before
// this backend noticed the loss: this backend removes neither, and what
// the new process wrote stays readable.
func TestStaleFilesKeepNewWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	old, _ := openLive(t, path, noWatcher)
	replaceStore(t, path)
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil {
			t.Fatal(err)
		}
	}
	fresh := openT(t, path, "e")
	_, v, err := fresh.Get(ctxT(t))
	if err != nil {
		t.Fatalf("Get on the new file: %v", err)
	}
	if _, err := fresh.Update(ctxT(t), v, backendtest.SampleRecord("n", 2)); err != nil {
		t.Fatalf("Update on the new file: %v", err)
	}
	before := statSides(t, path)

	if _, _, err := old.Get(ctxT(t)); !errors.Is(err, backend.ErrStoreLost) {
		t.Fatalf("Get on the old backend = %v, want ErrStoreLost", err)
	}
	after := statSides(t, path)
	for i, fi := range before {
		if !os.SameFile(fi, after[i]) {
			t.Fatalf("%s was removed or replaced by the old backend's loss", fi.Name())
		}
	}
	rec, _, err := openT(t, path, "e").Get(ctxT(t))
	if err != nil || rec.HolderIdentity != "n" {
		t.Fatalf("Get after the loss = holder %q, %v; want the new file's holder n", rec.HolderIdentity, err)
	}
}

// TestLossLoggedWithDetail: a loss noticed by the watch is logged with
// what the path names now and which stale files were removed.
func TestLossLoggedWithDetail(t *testing.T) {
	var out lockedBuffer
	path := filepath.Join(t.TempDir(), "leader.db")
	b, err := Open(ctxT(t), Options{Path: path, Election: "e", Logger: slog.New(slog.NewTextHandler(&out, nil))})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	replaceStore(t, path)
	awaitLoss(t, b, true)
	if err := b.Close(); err != nil { // waits for the watch, which logs
		t.Fatalf("Close: %v", err)
	}
	wantErrContains(t, errors.New(out.String()), path, "is now another file (device",
		"removed", path+"-wal", path+"-shm")
}

func watcherFor(watch bool) func() (*fsnotify.Watcher, error) {
	if watch {
		return nil
	}
	return noWatcher
}

// awaitLoss waits for Lost and then for the removal of the stale files
// that follows when the backend watches, else makes the call that notices
// the loss (which returns after the removal).
func awaitLoss(t *testing.T, b *Backend, watched bool) {
	if !watched {
		if _, _, err := b.Get(ctxT(t)); !errors.Is(err, backend.ErrStoreLost) {
			t.Errorf("Get after the loss = %v, want ErrStoreLost", err)
		}
		return
	}
	select {
	case <-b.Lost():
	case <-time.After(lostWait):
		t.Errorf("Lost still open %v after the loss", lostWait)
		return
	}
	select {
	case <-b.sides.cleaned:
	case <-time.After(lostWait):
		t.Errorf("stale files not dealt with %v after Lost closed", lostWait)
	}
}

func statSides(t *testing.T, path string) []os.FileInfo {
	t.Helper()
	var out []os.FileInfo
	for _, suffix := range []string{"-wal", "-shm"} {
		fi, err := os.Stat(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fi)
	}
	return out
}

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
