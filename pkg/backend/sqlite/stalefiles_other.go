//go:build !linux

package sqlite

import (
	"errors"
	"os"
	"time"
)

// openFiles cannot tell, on this system, which files the process has
// open, so a backend never removes the -wal and -shm beside a lost
// database here: the operator removes them before replacing the file.
func openFiles() ([]os.FileInfo, error) {
	return nil, errors.New("this system offers the backend no list of the files a process has open")
}

// lockDir is never reached where openFiles fails.
func lockDir(string, time.Duration) (func(), error) { return func() {}, nil }

// procFDs is unused where descriptors returns nil.
const procFDs = ""

// descriptors cannot list the files a process has open on this system.
func descriptors() descriptorSet { return nil }
