package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Defaults applied by Open to zero Options fields.
const (
	// DefaultTable is the table used when Options leaves it empty.
	DefaultTable = "leader_records"
	// DefaultPollInterval is the PollInterval used when Options leaves it
	// zero.
	DefaultPollInterval = 2 * time.Second
	// DefaultProbeTimeout is how long Watch waits for its own test
	// notification before it judges that LISTEN does not work (SignalAuto).
	DefaultProbeTimeout = 2 * time.Second
)

// poolConns is the size of the connection pool for Get, Create, Update and
// List of a Table's handles. Their Watches share one listening connection
// besides.
const poolConns = 3

// Signal is how Watch learns of another writer's change.
type Signal string

const (
	// SignalAuto listens for the table's notifications and checks, with a
	// notification of its own, that they arrive; where they do not (a
	// transaction-mode pooler such as PgBouncer), it polls instead.
	SignalAuto Signal = "auto"
	// SignalNotify listens for the table's notifications (LISTEN), and
	// polls only while its connection is down.
	SignalNotify Signal = "notify"
	// SignalPoll reads the record's version every PollInterval.
	SignalPoll Signal = "poll"
)

// Signals lists the values of Signal.
var Signals = []Signal{SignalAuto, SignalNotify, SignalPoll}

// Options configures Open.
type Options struct {
	// URL is the connection string: a postgres:// URL or libpq's
	// keyword/value form. Whatever it leaves out comes from the standard
	// PG* environment variables (PGHOST, PGUSER, PGPASSWORD, ...) and the
	// password file (PGPASSFILE, else ~/.pgpass), as with libpq. Empty
	// means the environment alone.
	URL string
	// Schema holds the table; empty means the first schema of the
	// connection's search_path.
	Schema string
	// Table is the table of records; empty means DefaultTable.
	Table string
	// Election is the name of the election: the key of its row. Required.
	Election string
	// Signal chooses the change signal; empty means SignalAuto.
	Signal Signal
	// PollInterval is how often Watch reads the record's version when it
	// polls. Zero means DefaultPollInterval; negative is an error.
	PollInterval time.Duration
	// ProbeTimeout is how long SignalAuto waits for its test notification.
	// Zero means DefaultProbeTimeout; negative is an error.
	ProbeTimeout time.Duration
	// listenDatabase, when set (by tests), is the database the listening
	// connections connect to instead of the URL's: notifications are per
	// database, so none arrives, as behind a transaction-mode pooler.
	listenDatabase string

	// Logger receives what the backend does on its own: the change signal
	// chosen, a listening connection lost and regained. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// Table is a connection to one table of records: a pool of at most
// poolConns connections and, while any of its handles watches, one
// listening connection (or one poller) for all of them. The handles it
// gives (Election) share both, so a shard group of N records opens as
// many connections as one election. A Table is safe for concurrent use.
type Table struct {
	opts      Options
	config    *pgconn.Config
	pool      *conns
	table     string // the table, quoted and qualified with its schema
	tableName string // schema.table as the notification payload names it
	where     string // the server, database and user, for Describe; no password
	password  string // removed from every error text
	log       *slog.Logger
	signals   *signals

	mu        sync.Mutex
	closed    bool
	closing   context.Context
	stop      context.CancelFunc
	watches   sync.WaitGroup
	closeOnce sync.Once
}

// Backend is one handle on one election in one table. Handles opened on
// the same table, in one process or on several machines, share its
// records. A Backend is safe for concurrent use.
type Backend struct {
	t        *Table
	election string
	// owns is true for a handle from Open: its Close closes the Table.
	owns bool

	closing   context.Context
	stop      context.CancelFunc
	watches   sync.WaitGroup
	closeOnce sync.Once
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Lister  = (*Backend)(nil)
)

// Open opens the table (OpenTable) for the one election opts.Election;
// closing the handle closes the table.
func Open(ctx context.Context, opts Options) (*Backend, error) {
	if opts.Election == "" {
		return nil, errors.New("postgres: Options.Election is empty")
	}
	t, err := OpenTable(ctx, opts)
	if err != nil {
		return nil, err
	}
	b := t.Election(opts.Election)
	b.owns = true
	return b, nil
}

// OpenTable connects to the server, creates the table, its triggers and
// functions if missing, and checks that the table can be written. It
// warns in the log when the server streams to asynchronous standbys only
// (see the package doc: What it requires of PostgreSQL). Every error
// names the server and table, never the password. Options.Election is not
// used: Election gives a handle on each election.
func OpenTable(ctx context.Context, opts Options) (*Table, error) {
	if err := validate(&opts); err != nil {
		return nil, err
	}
	config, err := parse(opts.URL)
	if err != nil {
		return nil, err
	}
	t := &Table{
		opts:     opts,
		config:   config,
		pool:     newConns(config, poolConns),
		where:    where(config),
		password: config.Password,
		log:      opts.Logger,
	}
	if t.log == nil {
		t.log = slog.Default()
	}
	if err := t.initSchema(ctx); err != nil {
		t.pool.close()
		return nil, t.fail("open", opts.Election, err)
	}
	t.checkReplication(ctx)
	t.closing, t.stop = context.WithCancel(context.Background())
	t.signals = newSignals(t)
	return t, nil
}

// Election is a handle on the record of election in the table, sharing
// the table's connections and change signal. Closing it ends its Watches
// only; the table stays open until Close.
func (t *Table) Election(election string) *Backend {
	b := &Backend{t: t, election: election}
	b.closing, b.stop = context.WithCancel(t.closing)
	return b
}

func validate(opts *Options) error {
	switch {
	case opts.PollInterval < 0:
		return fmt.Errorf("postgres: Options.PollInterval is negative (%v)", opts.PollInterval)
	case opts.ProbeTimeout < 0:
		return fmt.Errorf("postgres: Options.ProbeTimeout is negative (%v)", opts.ProbeTimeout)
	}
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if opts.Signal == "" {
		opts.Signal = SignalAuto
	}
	switch opts.Signal {
	case SignalAuto, SignalNotify, SignalPoll:
	default:
		return fmt.Errorf("postgres: Options.Signal %q is none of %v", opts.Signal, Signals)
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.ProbeTimeout == 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	return nil
}

// CheckURL returns an error if url (Options.URL) does not parse, naming
// the problem and never the string, which may hold a password.
func CheckURL(url string) error {
	_, err := parse(url)
	return err
}

func parse(url string) (*pgconn.Config, error) {
	config, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: the connection string does not parse: %s", parseProblem(err))
	}
	return config, nil
}

// parseProblem is what a connection string that does not parse has wrong,
// without the string itself (pgx masks the password only as best it can).
func parseProblem(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if inner := errors.Unwrap(pe); inner != nil {
			return fmt.Sprintf("%s (%s)", parseMessage(pe), scrubURLs(inner.Error()))
		}
		return parseMessage(pe)
	}
	return "it is not a postgres:// URL nor keyword=value pairs"
}

// parseMessage is the message of pe, without the connection string that
// its Error puts first.
func parseMessage(pe *pgconn.ParseConfigError) string {
	text := pe.Error()
	if i := strings.Index(text, "`: "); i >= 0 {
		text = text[i+3:]
	}
	if i := strings.LastIndex(text, " ("); i >= 0 {
		text = text[:i]
	}
	return text
}

// scrubURLs drops quoted text from a URL parser's error, which repeats
// the string that did not parse.
func scrubURLs(text string) string {
	if i := strings.Index(text, "\""); i >= 0 {
		if j := strings.LastIndex(text, "\""); j > i {
			return text[:i] + "<the URL>" + text[j+1:]
		}
	}
	return text
}

// where names the server, database and user of c, never the password.
func where(c *pgconn.Config) string {
	host := c.Host
	if strings.HasPrefix(host, "/") {
		host = "unix:" + host
	}
	return fmt.Sprintf("%s@%s:%d/%s", c.User, host, c.Port, c.Database)
}

// Describe implements backend.Backend: "postgres:" + user@host:port/database
// + "/" + schema.table + "#" + election. It never holds the password.
func (b *Backend) Describe() string {
	return "postgres:" + b.t.where + "/" + b.t.tableName + "#" + b.election
}

// fail wraps err for op with the election, server and table.
func (b *Backend) fail(op string, err error) error { return b.t.fail(op, b.election, err) }

// fail wraps err for op with the election (if any), server and table, and
// removes the password from its text wherever it appears.
func (t *Table) fail(op, election string, err error) error {
	table := t.tableName
	if table == "" {
		table = t.opts.Table
	}
	var wrapped error
	if election == "" {
		wrapped = fmt.Errorf("postgres: %s in %s on %s: %w", op, table, t.where, err)
	} else {
		wrapped = fmt.Errorf("postgres: %s %q in %s on %s: %w", op, election, table, t.where, err)
	}
	if t.password == "" || !strings.Contains(wrapped.Error(), t.password) {
		return wrapped
	}
	return &redacted{text: strings.ReplaceAll(wrapped.Error(), t.password, "xxxxx"), err: err}
}

// redacted is an error whose text had the password removed; errors.Is and
// errors.As still see the error it wraps.
type redacted struct {
	text string
	err  error
}

func (r *redacted) Error() string { return r.text }
func (r *redacted) Unwrap() error { return r.err }

// Close ends the handle's Watches (closing their channels); a handle from
// Open closes its table too. Later calls do nothing.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.stop()
		b.watches.Wait()
		if b.owns {
			_ = b.t.Close()
		}
	})
	return nil
}

// Close ends every Watch of every handle (closing its channel), waits for
// the signal's goroutines and closes every connection. Later calls do
// nothing.
func (t *Table) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		t.stop()
		t.watches.Wait()
		t.pool.close()
	})
	return nil
}
