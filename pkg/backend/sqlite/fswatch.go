package sqlite

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// watchFile sets up the watch on the file's directory and returns follow:
// follow(b) starts a goroutine, ended by Close, that runs checkFile as soon
// as the directory reports an event naming the file: a delete, a rename
// away, a rename or create over it, a write, a change of mode; follow(nil)
// drops the watch (Open failed). Open sets it up before the first
// connection opens and follows once the file is remembered: the events in
// between are kept (see dirSubscription), so none is missed. A write to
// the file or to its -wal (where SQLite appends every commit) also wakes
// the file's Watches (see processFile). When the path is a symbolic link,
// the directory of the file it resolves to (or will, once the file is
// made) is watched too. Events naming other files, such as SQLite's -shm,
// are dropped after a string comparison.
//
// Every Backend of the process shares one directory watcher (one inotify
// instance, of which Linux allows 128 per user by default), so a process
// may hold any number of handles; newWatcher, a seam for tests, gives the
// handle a watcher of its own instead. When the operating system refuses
// the watch (inotify limits, say), watchFile returns a warning for
// Warnings instead: the check that Get, Create and Update make on every
// call still notices the loss, only later.
func (b *Backend) watchFile(newWatcher func() (*fsnotify.Watcher, error)) (follow func(*Backend), warning string) {
	names := map[string]bool{b.path: true, filepath.Dir(b.path): true}
	dirs := []string{filepath.Dir(b.path)}
	if real := b.sides.real; real != b.path { // resolved even while the link dangles (a file not made yet)
		names[real], names[filepath.Dir(real)] = true, true
		dirs = append(dirs, filepath.Dir(real))
	}
	sub := &dirSubscription{
		names:  names,
		writes: map[string]bool{b.path: true, b.sides.real: true, b.sides.real + "-wal": true},
		dirs:   dirs,
		ready:  make(chan struct{}, 1),
	}
	w, failed, err := subscribeDirs(sub, newWatcher)
	if err != nil {
		return func(*Backend) {}, fmt.Sprintf("sqlite: cannot watch directory %s for %s being deleted or replaced (%v); "+
			"that is noticed only by the next Get, Create or Update", failed, b.path, err)
	}
	return func(opened *Backend) {
		if opened == nil {
			w.unsubscribe(sub)
			return
		}
		opened.watches.Add(1)
		go opened.followFile(w, sub)
	}, ""
}

// followFile checks the file on every event naming it or its directory
// (the directory itself deleted or renamed), and on every error the
// watcher reports (an overflowed queue may have dropped events). A write
// to the database or its -wal first wakes the file's Watches, which read
// data_version at once. It ends at Close or once the store is lost, when
// there is nothing left to notice.
func (b *Backend) followFile(w *dirWatcher, sub *dirSubscription) {
	defer b.watches.Done()
	defer w.unsubscribe(sub)
	for {
		select {
		case <-b.closing.Done():
			return
		case <-b.lost:
			return
		case <-sub.ready:
			wrote, check := sub.take()
			if wrote {
				b.shared.wakeups.notify()
			}
			if check {
				_ = b.checkFile() // a loss closes b.lost; another error waits for the next call
			}
		}
	}
}

// dirSubscription is what one Backend wants of a directory watcher: the
// directories to watch, the names whose events call for a check of the
// file, and the names whose writes wake its Watches. The watcher records
// what arrived in wrote and check, coalesced, and signals ready; follower
// takes both. Events before follow starts wait there.
type dirSubscription struct {
	names, writes map[string]bool
	dirs          []string
	ready         chan struct{} // capacity 1

	mu           sync.Mutex
	wrote, check bool
}

func (s *dirSubscription) deliver(ev fsnotify.Event) {
	wrote := s.writes[ev.Name] && ev.Has(fsnotify.Write)
	check := s.names[ev.Name]
	if wrote || check {
		s.mark(wrote, check)
	}
}

func (s *dirSubscription) mark(wrote, check bool) {
	s.mu.Lock()
	s.wrote = s.wrote || wrote
	s.check = s.check || check
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *dirSubscription) take() (wrote, check bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wrote, check = s.wrote, s.check
	s.wrote, s.check = false, false
	return wrote, check
}

// dirWatcher is one fsnotify watcher and the subscriptions it delivers
// events to. Directories are added once however many subscriptions name
// them, and removed with the last; the watcher is closed with its last
// subscription.
type dirWatcher struct {
	w      *fsnotify.Watcher
	shared bool // the process's watcher (processDirs), not a test's own

	mu   sync.Mutex
	dirs map[string]int // subscriptions per directory
	subs map[*dirSubscription]bool
}

// processDirs holds the watcher every Backend of the process shares, nil
// while no Backend watches.
var processDirs struct {
	sync.Mutex
	w *dirWatcher
}

// subscribeDirs adds sub to the process's watcher (started if none runs),
// or to a watcher of its own made by newWatcher when that is set. On
// error it returns the directory that could not be watched.
func subscribeDirs(sub *dirSubscription, newWatcher func() (*fsnotify.Watcher, error)) (*dirWatcher, string, error) {
	if newWatcher != nil {
		fw, err := newWatcher()
		if err != nil {
			return nil, sub.dirs[0], err
		}
		w := startDirWatcher(fw, false)
		failed, err := w.subscribe(sub)
		if err != nil {
			_ = fw.Close()
		}
		return w, failed, err
	}
	processDirs.Lock()
	defer processDirs.Unlock()
	if processDirs.w == nil {
		fw, err := fsnotify.NewWatcher()
		if err != nil {
			return nil, sub.dirs[0], err
		}
		processDirs.w = startDirWatcher(fw, true)
	}
	w := processDirs.w
	failed, err := w.subscribe(sub)
	if err != nil && w.idle() {
		processDirs.w = nil
		_ = w.w.Close()
	}
	return w, failed, err
}

func startDirWatcher(fw *fsnotify.Watcher, shared bool) *dirWatcher {
	w := &dirWatcher{w: fw, shared: shared, dirs: map[string]int{}, subs: map[*dirSubscription]bool{}}
	go w.deliver()
	return w
}

// subscribe adds sub's directories and then sub; on error nothing of sub
// stays.
func (w *dirWatcher) subscribe(sub *dirSubscription) (failed string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, dir := range sub.dirs {
		if w.dirs[dir] == 0 {
			if err := w.w.Add(dir); err != nil {
				w.dropDirs(sub.dirs[:i])
				return dir, err
			}
		}
		w.dirs[dir]++
	}
	w.subs[sub] = true
	return "", nil
}

// unsubscribe removes sub, its directories once no other subscription
// names them, and the watcher with its last subscription.
func (w *dirWatcher) unsubscribe(sub *dirSubscription) {
	if w.shared {
		processDirs.Lock()
		defer processDirs.Unlock()
	}
	w.mu.Lock()
	if !w.subs[sub] {
		w.mu.Unlock()
		return
	}
	delete(w.subs, sub)
	w.dropDirs(sub.dirs)
	idle := len(w.subs) == 0
	w.mu.Unlock()
	if idle {
		if w.shared {
			processDirs.w = nil
		}
		_ = w.w.Close()
	}
}

// dropDirs counts one subscription fewer for each of dirs. Caller holds mu.
func (w *dirWatcher) dropDirs(dirs []string) {
	for _, dir := range dirs {
		if w.dirs[dir]--; w.dirs[dir] <= 0 {
			delete(w.dirs, dir)
			_ = w.w.Remove(dir) // fails once the directory is gone, which removed it already
		}
	}
}

func (w *dirWatcher) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.subs) == 0
}

// deliver hands every event to the subscriptions that name it, and every
// error to all of them as a reason to check; it ends when the watcher is
// closed.
func (w *dirWatcher) deliver() {
	for {
		select {
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			w.mu.Lock()
			for sub := range w.subs {
				sub.deliver(ev)
			}
			w.mu.Unlock()
		case _, ok := <-w.w.Errors:
			if !ok {
				return
			}
			w.mu.Lock()
			for sub := range w.subs {
				sub.mark(false, true)
			}
			w.mu.Unlock()
		}
	}
}
