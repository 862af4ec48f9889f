package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// dirLockWait bounds how long a backend waits for the other backends on
// the same directory to finish their own removal before it gives up on
// its own (and logs that it did).
const dirLockWait = time.Second

// sideFiles is what a backend knows of SQLite's -wal and -shm beside its
// database, so that when the database is deleted or replaced it can
// remove the old file's, which a process opening the new file at the path
// would otherwise take as the new file's own, and never another's.
type sideFiles struct {
	real  string   // the database's location, symbolic links resolved at Open
	paths []string // real + "-wal", real + "-shm", in the order removed

	mu      sync.Mutex    // guards seen; a removal holds it to the end, and Close waits for it
	seen    []os.FileInfo // the files at paths when the path last named the database
	cleaned chan struct{} // closed once the removal after a loss has ended
}

// init names the files SQLite keeps beside the database at path: beside
// the file a symbolic link resolves to, as SQLite puts them.
func (s *sideFiles) init(path string) {
	s.real = resolve(path)
	s.paths = []string{s.real + "-wal", s.real + "-shm"}
	s.cleaned = make(chan struct{})
}

// stat returns the files at paths now, nil for a missing one. checkFile
// calls it before it stats the database, and keeps the result only if the
// database is still the one opened: the files seen then were its own.
func (s *sideFiles) stat() []os.FileInfo {
	out := make([]os.FileInfo, len(s.paths))
	for i, p := range s.paths {
		out[i], _ = os.Lstat(p)
	}
	return out
}

// note records the files stat returned as the database's own.
func (s *sideFiles) note(seen []os.FileInfo) {
	s.mu.Lock()
	s.seen = seen
	s.mu.Unlock()
}

// removeStale runs once the database is lost; db is the database file as
// Open found it. It removes each of paths whose file is one this process
// has open (so its inode number cannot have been reused) and was at that
// path while the path still named the database: a file of the old
// database. Anything else there (a file another process made for the new
// database) is kept. The backends on the directory take turns under a lock
// on it, so one never removes a file made after another backend's removal.
//
// It removes nothing while the old database still exists: when the path,
// looked at again under the lock, names it again (moved back), or when
// the file this process holds open still has a link in some directory
// (moved aside, or hard-linked elsewhere before the path was removed). Its
// -wal then holds every commit since its last checkpoint, which nothing
// copies into the file once it is moved. It returns a sentence for the log.
func (s *sideFiles) removeStale(path string, db os.FileInfo) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer close(s.cleaned)
	if now := resolve(path); now != s.real {
		return fmt.Sprintf("kept %s: the path now leads to %s", strings.Join(s.paths, " and "), now)
	}
	open, err := openFiles()
	if err != nil {
		return fmt.Sprintf("did not remove the old database's %s: %v; remove them by hand "+
			"unless a process has opened the file now at the path", strings.Join(s.paths, " and "), err)
	}
	unlock, err := lockDir(filepath.Dir(s.real), dirLockWait)
	if err != nil {
		return fmt.Sprintf("did not remove the old database's %s: %v", strings.Join(s.paths, " and "), err)
	}
	defer unlock()
	if why := stillExists(path, db, open); why != "" {
		return fmt.Sprintf("kept %s: %s, and they hold its commits since its last checkpoint; "+
			"move them with it, or put it back at %s", strings.Join(s.paths, " and "), why, path)
	}
	var done []string
	for i, p := range s.paths {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			done = append(done, fmt.Sprintf("could not examine %s: %v", p, err))
		case i >= len(s.seen) || !sameAsAny(fi, s.seen[i:i+1]) || !sameAsAny(fi, open):
			done = append(done, fmt.Sprintf("kept %s (%s): not a file of the old database", p, describeFile(fi)))
		default:
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				done = append(done, fmt.Sprintf("could not remove the old database's %s: %v", p, err))
			} else {
				done = append(done, fmt.Sprintf("removed the old database's %s (%s)", p, describeFile(fi)))
			}
		}
	}
	if len(done) == 0 {
		return "found no -wal or -shm of the old database to remove"
	}
	return strings.Join(done, "; ")
}

// stillExists says why the database db, lost at path, still exists, or ""
// when it provably does not: the path names it again, or the file this
// process holds open (among open) still has links. When no open file is
// db, or its link count cannot be read, it cannot prove the file gone and
// says so.
func stillExists(path string, db os.FileInfo, open []os.FileInfo) string {
	if fi, err := os.Stat(path); err == nil && os.SameFile(fi, db) {
		return "the path names the old database (" + describeFile(db) + ") again"
	}
	for _, fi := range open {
		if !os.SameFile(fi, db) {
			continue
		}
		switch n, ok := linkCount(fi); {
		case !ok:
			return "cannot tell whether the old database (" + describeFile(db) + ") still exists elsewhere"
		case n > 0:
			return fmt.Sprintf("the old database (%s) still exists under another name (%d links)", describeFile(db), n)
		default:
			return ""
		}
	}
	return "the old database (" + describeFile(db) + ") is not among the files this process has open, so cannot tell whether it still exists"
}

func sameAsAny(fi os.FileInfo, files []os.FileInfo) bool {
	for _, f := range files {
		if f != nil && os.SameFile(fi, f) {
			return true
		}
	}
	return false
}

// resolve is where SQLite puts the database at path: symbolic links
// resolved, a dangling one included (its target is where SQLite would
// create the file).
func resolve(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	if target, err := os.Readlink(path); err == nil {
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		return filepath.Join(dir, filepath.Base(path))
	}
	return path
}
