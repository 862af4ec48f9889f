package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	modernc "modernc.org/sqlite"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Defaults applied by Open to zero Options fields.
const (
	// DefaultBusyTimeout is the BusyTimeout used when Options leaves it zero.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultPollInterval is the PollInterval used when Options leaves it zero.
	DefaultPollInterval = 50 * time.Millisecond
)

// writerConns is the size of the connection pool for Get, Create and Update.
// Two lets a Get proceed while a write waits for the lock; more would only
// add writers queueing on SQLite's single write lock. Watches never use this
// pool, so they cannot starve it.
const writerConns = 2

// Options configures Open.
type Options struct {
	// Path is the database file. It is created if missing; its directory
	// must exist. Relative paths are made absolute at Open.
	Path string
	// Election is the name of the election (lease): the key of its row.
	// Required.
	Election string
	// BusyTimeout is how long a write waits for its turn among the
	// process's writes to the file, and then for SQLite's write lock, held
	// by another process, before failing. Zero means DefaultBusyTimeout;
	// negative is an error. It is rounded up to whole milliseconds.
	BusyTimeout time.Duration
	// PollInterval is how often Watch checks PRAGMA data_version even when
	// no write to the file was reported, which bounds how late a change
	// signal can be. Zero means
	// DefaultPollInterval; negative is an error.
	PollInterval time.Duration
	// AllowNetworkFS skips the refusal of a path on a network filesystem.
	// Open then succeeds and Warnings says what was detected, for the caller
	// to log. SQLite's locking is not reliable there.
	AllowNetworkFS bool
	// SharedFile accepts a file that already holds tables other than the
	// backend's own (an application's database, shared on purpose). Without
	// it Open refuses such a file, leaving it as it was: Open would add the
	// backend's tables and triggers to it and switch it to WAL mode, which
	// stays after the backend closes it.
	SharedFile bool
	// Logger receives what the backend does on its own: the loss of the
	// file, and the stale -wal and -shm it removed then. Nil means
	// slog.Default().
	Logger *slog.Logger

	// statfs replaces the filesystem-type lookup in tests; nil means the
	// operating system's.
	statfs statfsFunc
	// newWatcher replaces fsnotify.NewWatcher in tests; nil means fsnotify's.
	newWatcher func() (*fsnotify.Watcher, error)
}

// Backend is one handle on one election in one SQLite file. Handles opened
// on the same file, in one process or in several, share its records.
// A Backend is safe for concurrent use.
type Backend struct {
	path         string
	election     string
	busyTimeout  time.Duration
	pollInterval time.Duration
	warnings     []string
	log          *slog.Logger

	db        *sql.DB      // Get, Create and Update; writes begin IMMEDIATE
	releaseDB *sql.DB      // one connection for releases (durability.go)
	shared    *processFile // what the process's Backends on the file share (processfile.go)

	file     os.FileInfo   // the database file Open's first connection opened (connect)
	lost     chan struct{} // closed once the path no longer names file
	lostOnce sync.Once
	lostErr  error     // set before lost is closed
	sides    sideFiles // the -wal and -shm beside the file

	mu        sync.Mutex // guards closed against watches.Add
	closed    bool
	closing   context.Context // done once Close starts; ends every watch
	stop      context.CancelFunc
	watches   sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

var (
	_ backend.Backend      = (*Backend)(nil)
	_ backend.FirstCreator = (*Backend)(nil)
)

// openTries bounds how often Open starts again on the file now at the
// path when the one it was opening was deleted or replaced meanwhile.
const openTries = 3

// Open opens (creating if needed) the database at opts.Path, switches it to
// WAL mode, creates the schema if missing and checks that the file can be
// written. Every connection the Backend ever uses is on one file: the one
// its first connection opened (see Lost). When that file is deleted or
// replaced while Open runs, Open starts again on the file now at the path,
// a few times, and then fails with backend.ErrStoreLost. Every error names
// the file.
func Open(ctx context.Context, opts Options) (*Backend, error) {
	for try := 1; ; try++ {
		b, err := open(ctx, opts)
		if err == nil || !errors.Is(err, backend.ErrStoreLost) || try == openTries {
			return b, err
		}
	}
}

func open(ctx context.Context, opts Options) (*Backend, error) {
	if err := validate(&opts); err != nil {
		return nil, err
	}
	path, err := filepath.Abs(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: resolve path %q: %w", opts.Path, err)
	}
	if err := checkLocation(path); err != nil {
		return nil, err
	}
	if !opts.SharedFile {
		if err := checkNotShared(ctx, path); err != nil {
			return nil, err
		}
	}
	warning, err := checkNetworkFS(path, opts.statfs, opts.AllowNetworkFS)
	if err != nil {
		return nil, err
	}

	b := &Backend{
		path:         path,
		election:     opts.Election,
		busyTimeout:  opts.BusyTimeout,
		pollInterval: opts.PollInterval,
		log:          opts.Logger,
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	if warning != "" {
		b.warnings = append(b.warnings, warning)
	}
	b.lost = make(chan struct{})
	b.sides.init(b.path)
	// The directory is watched before the first connection opens, so a
	// deletion or replacement after it is reported, however soon.
	follow, warning := b.watchFile(opts.newWatcher)
	if warning != "" {
		b.warnings = append(b.warnings, warning)
	}
	if err := b.openHandles(ctx); err != nil {
		follow(nil)
		return nil, b.fail("open", err)
	}
	if err := b.attach(); err != nil {
		follow(nil)
		_ = b.closeHandles()
		return nil, b.fail("open", err)
	}
	b.closing, b.stop = context.WithCancel(context.Background())
	follow(b)
	return b, nil
}

// openHandles opens the writer pool, creating the schema if missing, and
// the release handle on b.path (see dsn). Every
// connection of each is opened through connect: the first one takes the
// file's identity, and each later one, whenever database/sql opens it, must
// be on that file. On failure it closes what it opened.
func (b *Backend) openHandles(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			_ = b.closeHandles()
		}
	}()
	if b.db, err = b.openPool(writerPool); err != nil {
		return err
	}
	b.db.SetMaxOpenConns(writerConns)
	b.db.SetMaxIdleConns(writerConns)
	if err = b.initSchemaPatiently(ctx); err != nil {
		return err
	}
	if b.releaseDB, err = b.openPool(releasePool); err != nil {
		return err
	}
	b.releaseDB.SetMaxOpenConns(1)
	b.releaseDB.SetMaxIdleConns(1)
	// Open the release connection now rather than at the first release,
	// which is on the way of a graceful hand-off.
	return b.releaseDB.PingContext(ctx)
}

// openPool returns a handle whose connections, for p, open through
// connect.
func (b *Backend) openPool(p pool) (*sql.DB, error) {
	base, err := newConnector(b.path, b.busyTimeout, p)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(fileConnector{Connector: base, b: b}), nil
}

// newConnector is the driver's connector for p's connections to path,
// before any identity check.
func newConnector(path string, busyTimeout time.Duration, p pool) (driver.Connector, error) {
	return modernc.NewConnector(dsn(path, busyTimeout, p))
}

// closeHandles closes every handle openHandles opened.
func (b *Backend) closeHandles() error {
	var errs []error
	for _, db := range []*sql.DB{b.releaseDB, b.db} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}

func validate(opts *Options) error {
	switch {
	case opts.Path == "":
		return errors.New("sqlite: Options.Path is empty")
	case opts.Election == "":
		return errors.New("sqlite: Options.Election is empty")
	case opts.BusyTimeout < 0:
		return fmt.Errorf("sqlite: Options.BusyTimeout is negative (%v)", opts.BusyTimeout)
	case opts.PollInterval < 0:
		return fmt.Errorf("sqlite: Options.PollInterval is negative (%v)", opts.PollInterval)
	}
	if opts.BusyTimeout == 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	return nil
}

// checkLocation fails early, naming the path, when SQLite could only fail
// later with a vaguer message.
func checkLocation(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("sqlite: open %s: directory %s does not exist", path, dir)
	case err != nil:
		return fmt.Errorf("sqlite: open %s: %w", path, err)
	case !st.IsDir():
		return fmt.Errorf("sqlite: open %s: %s is not a directory", path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("sqlite: open %s: it is a directory, not a database file", path)
	}
	return nil
}

// pool is what a handle's connections are for, which sets their DSN.
type pool int

const (
	writerPool  pool = iota // Get, and writes that name a holder: synchronous=FULL
	releasePool             // releases: synchronous=NORMAL (durability.go)
	watchPool               // PRAGMA data_version only; never creates the file
	readPool                // ReadAll: reads only, never creates or changes the file
)

// dsn builds a file: URI for the driver. Both writing pools begin every
// transaction with BEGIN IMMEDIATE and put the file in WAL mode (a no-op
// once it is).
func dsn(path string, busyTimeout time.Duration, p pool) string {
	ms := int64(math.Ceil(float64(busyTimeout) / float64(time.Millisecond)))
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(ms, 10))
	q.Set("_synchronous", "FULL")
	if p == releasePool {
		q.Set("_synchronous", "NORMAL")
	}
	switch p {
	case watchPool:
		q.Set("mode", "rw")
	case readPool:
		q.Set("mode", "ro")
	default:
		q.Set("_txlock", "immediate")
		q.Set("_journal_mode", "WAL")
	}
	// In a URI '%', '?' and '#' in the path would be read as an escape, the
	// query and the fragment.
	escaped := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(filepath.ToSlash(path))
	if !strings.HasPrefix(escaped, "/") {
		escaped = "/" + escaped // a Windows volume: file:/C:/dir/file.db
	}
	return "file:" + escaped + "?" + q.Encode()
}

// Describe implements backend.Backend: "sqlite:" + absolute path + "#" +
// election.
func (b *Backend) Describe() string { return "sqlite:" + b.path + "#" + b.election }

// Warnings returns what Open noticed but was told to accept, such as a
// network filesystem under Options.AllowNetworkFS, or could not set up,
// such as the watch on the file's directory, for the caller to log.
func (b *Backend) Warnings() []string { return append([]string(nil), b.warnings...) }

// Close ends every Watch (closing its channel) and the watch on the
// file's directory, waits for their goroutines and closes all connections.
// It leaves Lost open. Later calls return the first call's result.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()

		b.stop()
		b.watches.Wait()
		b.sides.mu.Lock() // a removal of stale files needs the connections open
		defer b.sides.mu.Unlock()
		if err := errors.Join(b.shared.detach(b), b.closeHandles()); err != nil {
			b.closeErr = fmt.Errorf("sqlite: close %s: %w", b.path, err)
		}
	})
	return b.closeErr
}
