package sidecartest

import (
	"strings"
	"sync"
)

// LockedBuffer is a strings.Builder that goroutines may write and read at
// once: a process's output, kept for assertions and failure messages.
type LockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
