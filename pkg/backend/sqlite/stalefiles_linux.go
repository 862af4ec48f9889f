package sqlite

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// openFiles returns the files this process has open, from /proc/self/fd:
// a descriptor's link there stats as the open file, even once it was
// removed from its directory.
func openFiles() ([]os.FileInfo, error) {
	const dir = procFDs
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list the files this process has open: %w", err)
	}
	out := make([]os.FileInfo, 0, len(entries))
	for _, e := range entries {
		if fi, err := os.Stat(dir + "/" + e.Name()); err == nil { // closed since listed: skipped
			out = append(out, fi)
		}
	}
	return out, nil
}

// procFDs lists this process's descriptors, each a link to its file.
const procFDs = "/proc/self/fd"

// descriptors returns the files this process has open, by descriptor, or
// nil when /proc cannot be read.
func descriptors() descriptorSet {
	entries, err := os.ReadDir(procFDs)
	if err != nil {
		return nil
	}
	out := make(descriptorSet, len(entries))
	for _, e := range entries {
		if fi, err := os.Stat(procFDs + "/" + e.Name()); err == nil {
			out[e.Name()] = fi
		}
	}
	return out
}

// lockDir takes an exclusive flock on dir, waiting up to wait for the
// backends of other processes (or of this one) that hold it, and returns
// its release. Only this package takes that lock: SQLite locks files with
// fcntl, which is independent of flock on Linux.
func lockDir(dir string, wait time.Duration) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot lock directory %s: %w", dir, err)
	}
	fd := int(f.Fd())
	deadline := time.Now().Add(wait)
	for {
		err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(fd, syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) || time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("cannot lock directory %s within %v: %w", dir, wait, err)
		}
		time.Sleep(time.Millisecond)
	}
}
