// Package memory is an in-process Backend: a map of records behind a mutex,
// with the same compare-and-swap and change-signal semantics as the real
// stores. It is the test double for package election and a reference for
// what a backend must do, with every optional interface a store can offer
// but LossNotifier: FirstCreator, as SQLite, and Snapshotter, as the Lease.
//
// A Store holds any number of elections; each Backend opened on it is one
// writer's handle to one election, so several handles on one Store behave
// like several processes sharing a database.
//
// To stand for a store without snapshots (SQLite), hide Snapshot behind a
// type that embeds backend.Backend alone.
package memory

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Store is a set of records shared by the Backends opened on it.
type Store struct {
	mu       sync.Mutex
	records  map[string]stored
	created  map[string]bool // elections that ever had a record, deleted ones included
	versions int64
	watchers map[string]map[chan struct{}]struct{}
	fail     error
}

type stored struct {
	rec     backend.Record
	version backend.Version
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{
		records:  map[string]stored{},
		created:  map[string]bool{},
		watchers: map[string]map[chan struct{}]struct{}{},
	}
}

// Open returns a handle to the election called name.
func (s *Store) Open(name string) *Backend {
	return &Backend{store: s, name: name}
}

// Delete removes the record of an election, as an operator deleting a Lease
// would, and signals its watchers. The Store remembers that the record
// existed: a later Get reports ErrNotFound, never ErrNeverCreated.
func (s *Store) Delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, name)
	s.notifyLocked(name)
}

// SetError makes every later Get, Create and Update fail with err until it
// is called again with nil: a store that cannot be reached.
func (s *Store) SetError(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

func (s *Store) notifyLocked(name string) {
	for ch := range s.watchers[name] {
		backend.Notify(ch)
	}
}

func (s *Store) nextVersionLocked() backend.Version {
	s.versions++
	return backend.Version(strconv.FormatInt(s.versions, 10))
}

// Backend is one handle to one election in a Store.
type Backend struct {
	store    *Store
	name     string
	watching int // Watches of this handle running, under store.mu
}

var (
	_ backend.Backend      = (*Backend)(nil)
	_ backend.FirstCreator = (*Backend)(nil)
	_ backend.Snapshotter  = (*Backend)(nil)
	_ backend.Lister       = (*Backend)(nil)
)

// Get implements backend.Backend.
func (b *Backend) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := b.checkLocked(ctx, "get"); err != nil {
		return backend.Record{}, "", err
	}
	st, ok := s.records[b.name]
	if !ok {
		if !s.created[b.name] {
			return backend.Record{}, "", fmt.Errorf("memory: get %q: %w (%w)", b.name, backend.ErrNotFound, backend.ErrNeverCreated)
		}
		return backend.Record{}, "", fmt.Errorf("memory: get %q: %w", b.name, backend.ErrNotFound)
	}
	return st.rec, st.version, nil
}

// Create implements backend.Backend.
func (b *Backend) Create(ctx context.Context, rec backend.Record) (backend.Version, error) {
	return b.create(ctx, rec, false)
}

// CreateFirst implements backend.FirstCreator: the Store remembers every
// election whose record was ever created, deleted or not.
func (b *Backend) CreateFirst(ctx context.Context, rec backend.Record) (backend.Version, error) {
	return b.create(ctx, rec, true)
}

// create is Create, and with first CreateFirst.
func (b *Backend) create(ctx context.Context, rec backend.Record, first bool) (backend.Version, error) {
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := b.checkLocked(ctx, "create"); err != nil {
		return "", err
	}
	if err := backend.CheckRecord(rec); err != nil {
		return "", fmt.Errorf("memory: create %q: %w", b.name, err)
	}
	if _, ok := s.records[b.name]; ok {
		return "", fmt.Errorf("memory: create %q: %w", b.name, backend.ErrAlreadyExists)
	}
	if first && s.created[b.name] {
		return "", fmt.Errorf("memory: create %q as the first record: one was created before: %w", b.name, backend.ErrAlreadyExists)
	}
	return b.putLocked(rec), nil
}

// Update implements backend.Backend.
func (b *Backend) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := b.checkLocked(ctx, "update"); err != nil {
		return "", err
	}
	if err := backend.CheckRecord(rec); err != nil {
		return "", fmt.Errorf("memory: update %q: %w", b.name, err)
	}
	st, ok := s.records[b.name]
	if !ok {
		return "", fmt.Errorf("memory: update %q: %w", b.name, backend.ErrNotFound)
	}
	if st.version != prev {
		return "", fmt.Errorf("memory: update %q from version %s (stored %s): %w", b.name, prev, st.version, backend.ErrConflict)
	}
	return b.putLocked(rec), nil
}

func (b *Backend) checkLocked(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: %s %q: %w", op, b.name, err)
	}
	if b.store.fail != nil {
		return fmt.Errorf("memory: %s %q: %w", op, b.name, b.store.fail)
	}
	return nil
}

func (b *Backend) putLocked(rec backend.Record) backend.Version {
	rec.AcquireTime = rec.AcquireTime.Truncate(backend.TimePrecision)
	rec.RenewTime = rec.RenewTime.Truncate(backend.TimePrecision)
	v := b.store.nextVersionLocked()
	b.store.records[b.name] = stored{rec: rec, version: v}
	b.store.created[b.name] = true
	b.store.notifyLocked(b.name)
	return v
}

// Watch implements backend.Backend.
func (b *Backend) Watch(ctx context.Context) <-chan struct{} {
	s := b.store
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if s.watchers[b.name] == nil {
		s.watchers[b.name] = map[chan struct{}]struct{}{}
	}
	s.watchers[b.name][ch] = struct{}{}
	b.watching++
	s.mu.Unlock()

	go func() {
		<-ctx.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.watchers[b.name], ch)
		b.watching--
		close(ch)
	}()
	return ch
}

// Snapshot implements backend.Snapshotter. A Watch sees every write the
// moment it is made, so while a Watch of this handle runs the snapshot is
// the record as the Store holds it, with its version, and no request is
// counted by a wrapper around the handle. It is not ok while no Watch of
// this handle runs, or while the election has no record.
func (b *Backend) Snapshot() (backend.Record, backend.Version, bool) {
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.records[b.name]
	if !ok || b.watching == 0 {
		return backend.Record{}, "", false
	}
	return st.rec, st.version, true
}

// List implements backend.Lister over every election of the Store.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Listed, error) {
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := b.checkLocked(ctx, "list"); err != nil {
		return nil, err
	}
	var out []backend.Listed
	for name, st := range s.records {
		if strings.HasPrefix(name, prefix) {
			out = append(out, backend.Listed{Name: name, Record: st.rec, Version: st.version})
		}
	}
	slices.SortFunc(out, func(a, b backend.Listed) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Describe implements backend.Backend.
func (b *Backend) Describe() string { return "memory#" + b.name }

// Close implements backend.Backend.
func (b *Backend) Close() error { return nil }
