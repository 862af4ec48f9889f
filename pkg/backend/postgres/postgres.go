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
// List. Every Watch has one connection of its own besides.
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

// Backend is one handle on one election in one table. Handles opened on
// the same table, in one process or on several machines, share its
// records. A Backend is safe for concurrent use.
type Backend struct {
	opts      Options
	config    *pgconn.Config
	pool      *conns
	table     string // the table, quoted and qualified with its schema
	tableName string // schema.table as the notification payload names it
	where     string // the server, database and user, for Describe; no password
	password  string // removed from every error text
	log       *slog.Logger

	mu        sync.Mutex
	closed    bool
	closing   context.Context
	stop      context.CancelFunc
	watches   sync.WaitGroup
	closeOnce sync.Once
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Lister  = (*Backend)(nil)
)

// Open connects to the server, creates the table, its triggers and
// functions if missing, and checks that the table can be written. It
// warns in the log when the server streams to asynchronous standbys only
// (see the package doc: What it requires of PostgreSQL). Every error
// names the server and table, never the password.
func Open(ctx context.Context, opts Options) (*Backend, error) {
	if err := validate(&opts); err != nil {
		return nil, err
	}
	config, err := parse(opts.URL)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		opts:     opts,
		config:   config,
		pool:     newConns(config, poolConns),
		where:    where(config),
		password: config.Password,
		log:      opts.Logger,
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	if err := b.initSchema(ctx); err != nil {
		b.pool.close()
		return nil, b.fail("open", err)
	}
	b.checkReplication(ctx)
	b.closing, b.stop = context.WithCancel(context.Background())
	return b, nil
}

func validate(opts *Options) error {
	switch {
	case opts.Election == "":
		return errors.New("postgres: Options.Election is empty")
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
	return "postgres:" + b.where + "/" + b.tableName + "#" + b.opts.Election
}

// fail wraps err for op with the election, server and table, and removes
// the password from its text wherever it appears.
func (b *Backend) fail(op string, err error) error {
	table := b.tableName
	if table == "" {
		table = b.opts.Table
	}
	wrapped := fmt.Errorf("postgres: %s %q in %s on %s: %w", op, b.opts.Election, table, b.where, err)
	if b.password == "" || !strings.Contains(wrapped.Error(), b.password) {
		return wrapped
	}
	return &redacted{text: strings.ReplaceAll(wrapped.Error(), b.password, "xxxxx"), err: err}
}

// redacted is an error whose text had the password removed; errors.Is and
// errors.As still see the error it wraps.
type redacted struct {
	text string
	err  error
}

func (r *redacted) Error() string { return r.text }
func (r *redacted) Unwrap() error { return r.err }

// Close ends every Watch (closing its channel), waits for their
// goroutines and closes every connection. Later calls do nothing.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		b.stop()
		b.watches.Wait()
		b.pool.close()
	})
	return nil
}
