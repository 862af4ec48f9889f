package sqlite

import (
	"fmt"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// watchFile sets up the watch on the file's directory and returns follow:
// follow(b) starts a goroutine, ended by Close, that runs checkFile as soon
// as the directory reports an event naming the file: a delete, a rename
// away, a rename or create over it, a write, a change of mode; follow(nil)
// drops the watch (Open failed). Open sets it up before the first
// connection opens and follows once the file is remembered: the events in
// between wait in the watch's queue, so none is missed. A write to the file
// or to its -wal (where SQLite appends every commit) also wakes every
// Watch. When the path is a symbolic link, the directory of the file it
// resolves to (or will, once the file is made) is watched too. Events naming other files, such as SQLite's
// -shm, are dropped after a string comparison.
//
// When the operating system refuses the watch (inotify limits, say),
// watchFile returns a warning for Warnings instead: the check that Get,
// Create and Update make on every call still notices the loss, only later.
// newWatcher nil means fsnotify.NewWatcher.
func (b *Backend) watchFile(newWatcher func() (*fsnotify.Watcher, error)) (follow func(*Backend), warning string) {
	if newWatcher == nil {
		newWatcher = fsnotify.NewWatcher
	}
	names := map[string]bool{b.path: true, filepath.Dir(b.path): true}
	dirs := []string{filepath.Dir(b.path)}
	if real := b.sides.real; real != b.path { // resolved even while the link dangles (a file not made yet)
		names[real], names[filepath.Dir(real)] = true, true
		dirs = append(dirs, filepath.Dir(real))
	}
	w, err := newWatcher()
	failed := dirs[0]
	for i := 0; err == nil && i < len(dirs); i++ {
		failed, err = dirs[i], w.Add(dirs[i])
	}
	if err != nil {
		if w != nil {
			_ = w.Close()
		}
		return func(*Backend) {}, fmt.Sprintf("sqlite: cannot watch directory %s for %s being deleted or replaced (%v); "+
			"that is noticed only by the next Get, Create or Update", failed, b.path, err)
	}
	writes := map[string]bool{b.path: true, b.sides.real: true, b.sides.real + "-wal": true}
	return func(opened *Backend) {
		if opened == nil {
			_ = w.Close()
			return
		}
		opened.watches.Add(1)
		go opened.followFile(w, names, writes)
	}, ""
}

// followFile checks the file on every event naming it or its directory
// (the directory itself deleted or renamed), and on every error the watch
// reports (an overflowed queue may have dropped events). A write to a
// file in writes (the database and its -wal) first wakes the active
// watches, which read data_version at once. It ends at Close or once the
// store is lost, when there is nothing left to notice.
func (b *Backend) followFile(w *fsnotify.Watcher, names, writes map[string]bool) {
	defer b.watches.Done()
	defer func() { _ = w.Close() }()
	for {
		select {
		case <-b.closing.Done():
			return
		case <-b.lost:
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if writes[ev.Name] && ev.Has(fsnotify.Write) {
				b.wakeups.notify()
			}
			if names[ev.Name] {
				_ = b.checkFile() // a loss closes b.lost; another error waits for the next call
			}
		case _, ok := <-w.Errors:
			if !ok {
				return
			}
			_ = b.checkFile()
		}
	}
}
