package process

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The files a sidecar process holds open under the names of a SQLite
// database (the file, its -wal and -shm), read from /proc/<pid>/fd: which
// file a process is on, whether one it opened was deleted or replaced
// since, and (openWatch) when starting processes first open it.

// databaseFiles are the names of the database at path: the file, its -wal
// and its -shm.
func databaseFiles(path string) []string { return []string{path, path + "-wal", path + "-shm"} }

// statDatabaseFiles is the file at each name of the database at path
// (those missing left out).
func statDatabaseFiles(path string) map[string]os.FileInfo {
	files := map[string]os.FileInfo{}
	for _, name := range databaseFiles(path) {
		if fi, err := os.Stat(name); err == nil {
			files[name] = fi
		}
	}
	return files
}

// openFile is a file a process holds open under one of the database's
// names.
type openFile struct {
	name    string // the name it was opened by
	deleted bool   // no longer at that name
	info    os.FileInfo
}

func (f openFile) String() string {
	if f.deleted {
		return f.name + " (deleted)"
	}
	return f.name
}

// heldFiles is what process pid holds open under the names of the
// database at path, read from /proc/<pid>/fd; nil once it has exited.
func heldFiles(pid int, path string) []openFile {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var held []openFile
	for _, e := range entries {
		fd := filepath.Join(dir, e.Name())
		target, err := os.Readlink(fd)
		if err != nil {
			continue
		}
		name, deleted := strings.CutSuffix(target, " (deleted)")
		if !slices.Contains(databaseFiles(path), name) {
			continue
		}
		if fi, err := os.Stat(fd); err == nil {
			held = append(held, openFile{name, deleted, fi})
		}
	}
	return held
}

// holdsOnly reports whether held includes the database file at path and
// nothing but the files now at the database's names (current).
func holdsOnly(held []openFile, current map[string]os.FileInfo, path string) bool {
	db := false
	for _, f := range held {
		if now, ok := current[f.name]; f.deleted || !ok || !os.SameFile(f.info, now) {
			return false
		}
		db = db || f.name == path
	}
	return db
}

// openWatch reads the descriptors of starting sidecars every millisecond
// (heldFiles): when each first holds a file of the database open, and
// whether it held the database as it was before the loss.
type openWatch struct {
	procs []*sidecartest.Sidecar
	path  string
	old   map[string]os.FileInfo // the database's files before the loss
	lost  atomic.Bool            // the loss has begun
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	mu      sync.Mutex
	opened  []time.Time // when each was first seen holding a file of the database
	heldOld []bool
}

// watchOpens starts reading the descriptors of procs, which start on the
// database at path whose files are old.
func watchOpens(procs []*sidecartest.Sidecar, path string, old map[string]os.FileInfo) *openWatch {
	w := &openWatch{procs: procs, path: path, old: old, done: make(chan struct{}),
		opened: make([]time.Time, len(procs)), heldOld: make([]bool, len(procs))}
	w.wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			w.read()
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
		}
	})
	return w
}

// read reads every process's descriptors once. A file is the old one if
// it has the inode of the old file of its name and it was read before the
// loss began or is no longer at its name (a file made at the name after
// the loss may get an old file's inode number again).
func (w *openWatch) read() {
	for i, s := range w.procs {
		before := !w.lost.Load()
		held := heldFiles(s.Pid(), w.path)
		at := time.Now()
		w.mu.Lock()
		for _, f := range held {
			if w.opened[i].IsZero() {
				w.opened[i] = at
			}
			if was, ok := w.old[f.name]; ok && os.SameFile(f.info, was) && (before || f.deleted) {
				w.heldOld[i] = true
			}
		}
		w.mu.Unlock()
	}
}

// awaitOpened waits until n of the processes hold a file of the database
// open.
func (w *openWatch) awaitOpened(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Microsecond) {
		k := 0
		w.mu.Lock()
		for _, at := range w.opened {
			if !at.IsZero() {
				k++
			}
		}
		w.mu.Unlock()
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d sidecars opened %s within 30s; want %d", k, len(w.opened), w.path, n)
		}
	}
}

// loses tells the watch that the loss begins.
func (w *openWatch) loses() { w.lost.Store(true) }

// stop stops reading (if it has not) and returns when each process first
// held a file of the database (zero: not seen) and whether it held the old
// one.
func (w *openWatch) stop() (opened []time.Time, heldOld []bool) {
	w.once.Do(func() { close(w.done) })
	w.wg.Wait()
	return w.opened, w.heldOld
}
