package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// lostWait bounds the wait for Lost to close: a failure bound for a loss
// that is never noticed, not a speed target.
const lostWait = 10 * time.Second

// noWatcher is the seam that makes Open run without a directory watch, as
// when the operating system refuses one; only the check on every call is
// left.
func noWatcher() (*fsnotify.Watcher, error) {
	return nil, errors.New("too many open files (test)")
}

// openLive opens path for election, creates the record and returns the
// backend and the record's version. The backend is closed at cleanup.
func openLive(t *testing.T, path string, watcher func() (*fsnotify.Watcher, error)) (*Backend, backend.Version) {
	t.Helper()
	b, err := Open(ctxT(t), Options{Path: path, Election: "e", newWatcher: watcher})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	v, err := b.Create(ctxT(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return b, v
}

// deleteStore removes the database and SQLite's files beside it, as an
// operator cleaning up by hand would, and returns when it began.
func deleteStore(t *testing.T, path string) time.Time {
	t.Helper()
	start := time.Now()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	return start
}

// replaceStore renames another database, made at another path in the same
// directory, over path, and returns when it renamed.
func replaceStore(t *testing.T, path string) time.Time {
	t.Helper()
	other := filepath.Join(filepath.Dir(path), "other.db")
	b, err := Open(ctxT(t), Options{Path: other, Election: "e"})
	if err != nil {
		t.Fatalf("Open other: %v", err)
	}
	if _, err := b.Create(ctxT(t), backendtest.SampleRecord("b", 1)); err != nil {
		t.Fatalf("Create in other: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close other: %v", err)
	}
	start := time.Now()
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	return start
}

var losses = []struct {
	name  string
	lose  func(t *testing.T, path string) time.Time
	found string // what the error says the path names now
}{
	{"deleted", deleteStore, "is missing"},
	{"replaced", replaceStore, "is now another file"},
}

// wantLost fails t unless every call on b fails with an error wrapping
// backend.ErrStoreLost that names the file and what was found there.
func wantLost(t *testing.T, b *Backend, v backend.Version, path, found string) {
	t.Helper()
	_, _, getErr := b.Get(ctxT(t))
	_, createErr := b.Create(ctxT(t), backendtest.SampleRecord("c", 2))
	_, updateErr := b.Update(ctxT(t), v, backendtest.SampleRecord("c", 2))
	for op, err := range map[string]error{"Get": getErr, "Create": createErr, "Update": updateErr} {
		if !errors.Is(err, backend.ErrStoreLost) {
			t.Fatalf("%s after the loss = %v, want ErrStoreLost", op, err)
		}
		wantErrContains(t, err, path, found)
	}
}

// TestLostNoticedByWatch: deleting the file, or renaming another over it,
// closes Lost without any call on the backend, and every later call fails
// with ErrStoreLost.
func TestLostNoticedByWatch(t *testing.T) {
	for _, tt := range losses {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "leader.db")
			b, v := openLive(t, path, nil)
			if w := b.Warnings(); len(w) != 0 {
				t.Fatalf("Warnings() = %q, want none", w)
			}
			start := tt.lose(t, path)
			select {
			case <-b.Lost():
				t.Logf("Lost closed %v after the file was %s", time.Since(start), tt.name)
			case <-time.After(lostWait):
				t.Fatalf("Lost still open %v after the file was %s", lostWait, tt.name)
			}
			wantLost(t, b, v, path, tt.found)
		})
	}
}

// TestLostNoticedByCall: without a directory watch, Open warns, Lost stays
// open until a call, and the first Get, Create or Update after the loss
// fails with ErrStoreLost and closes Lost.
func TestLostNoticedByCall(t *testing.T) {
	type call func(t *testing.T, b *Backend, v backend.Version) error
	calls := map[string]call{
		"Get": func(t *testing.T, b *Backend, _ backend.Version) error {
			_, _, err := b.Get(ctxT(t))
			return err
		},
		"Create": func(t *testing.T, b *Backend, _ backend.Version) error {
			_, err := b.Create(ctxT(t), backendtest.SampleRecord("c", 2))
			return err
		},
		"Update": func(t *testing.T, b *Backend, v backend.Version) error {
			_, err := b.Update(ctxT(t), v, backendtest.SampleRecord("c", 2))
			return err
		},
	}
	for _, tt := range losses {
		for op, call := range calls {
			t.Run(tt.name+"/"+op, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "leader.db")
				b, v := openLive(t, path, noWatcher)
				if w := b.Warnings(); len(w) != 1 {
					t.Fatalf("Warnings() = %q, want one about the watch", w)
				}
				wantErrContains(t, errors.New(b.Warnings()[0]), filepath.Dir(path), "too many open files")
				tt.lose(t, path)
				select {
				case <-b.Lost():
					t.Fatal("Lost closed with no watch and no call")
				default:
				}
				err := call(t, b, v)
				if !errors.Is(err, backend.ErrStoreLost) {
					t.Fatalf("%s after the loss = %v, want ErrStoreLost", op, err)
				}
				select {
				case <-b.Lost():
				default:
					t.Fatalf("Lost still open after %s returned ErrStoreLost", op)
				}
				wantLost(t, b, v, path, tt.found)
			})
		}
	}
}

// TestLostSignalsWatch: an active Watch gets a signal when the store is
// lost, so a standby that only watches calls Get and learns of it.
func TestLostSignalsWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	b, _ := openLive(t, path, nil)
	changes := b.Watch(ctxT(t))
	waitSignal(t, changes, lostWait, "baseline")
	deleteStore(t, path)
	waitSignal(t, changes, lostWait, "loss")
	if _, _, err := b.Get(ctxT(t)); !errors.Is(err, backend.ErrStoreLost) {
		t.Fatalf("Get after the signal = %v, want ErrStoreLost", err)
	}
}

// TestCloseKeepsLostOpen: Close ends the watch without closing Lost.
func TestCloseKeepsLostOpen(t *testing.T) {
	b, err := Open(ctxT(t), Options{Path: filepath.Join(t.TempDir(), "leader.db"), Election: "e"})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	lost := b.Lost()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-lost:
		t.Fatal("Close closed Lost")
	default:
	}
}

// TestLostThroughSymlink: when the path is a symbolic link, deleting the
// file it points to is noticed by the watch on that file's directory.
func TestLostThroughSymlink(t *testing.T) {
	real := filepath.Join(t.TempDir(), "real.db")
	path := filepath.Join(t.TempDir(), "leader.db")
	if err := os.Symlink(real, path); err != nil {
		t.Skipf("cannot make a symbolic link here: %v", err)
	}
	b, _ := openLive(t, path, nil)
	deleteStore(t, real)
	select {
	case <-b.Lost():
	case <-time.After(lostWait):
		t.Fatalf("Lost still open %v after the file behind the link was deleted", lostWait)
	}
	if _, _, err := b.Get(ctxT(t)); !errors.Is(err, backend.ErrStoreLost) {
		t.Fatalf("Get = %v, want ErrStoreLost", err)
	}
}
