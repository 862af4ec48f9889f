package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/postgres"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// postgresConfig is the PostgreSQL store (--backend postgres).
type postgresConfig struct {
	url    string
	schema string
	table  string
	signal string
}

func (c *postgresConfig) add(fs *pflag.FlagSet) {
	fs.StringVar(&c.url, "postgres-url", "", "PostgreSQL connection string (postgres:// URL or key=value pairs); what it leaves out comes from the PG* variables and the password file, as with libpq")
	docDefault(fs, "postgres-url", "the `PG*` variables")
	docMeaning(fs, "postgres-url", "the PostgreSQL server of `--backend postgres`: a `postgres://` URL or libpq's `key=value` pairs. What it leaves out comes from the standard `PG*` variables (`PGHOST`, `PGUSER`, `PGPASSWORD`, ...) and the password file (`PGPASSFILE`, else `~/.pgpass`), as with `psql`. The password is never logged nor printed: `sidecar check` masks it ([PostgreSQL](backends.md#postgresql-backend))")
	fs.StringVar(&c.schema, "postgres-schema", "", "schema of the table of records (default: the first schema of the search_path)")
	docDefault(fs, "postgres-schema", "the `search_path`'s first")
	docMeaning(fs, "postgres-schema", "schema of the table of records; it must exist")
	fs.StringVar(&c.table, "postgres-table", postgres.DefaultTable, "table of records, created with its triggers if missing")
	docMeaning(fs, "postgres-table", "table of records, one row per election, created with its triggers if missing")
	fs.StringVar(&c.signal, "postgres-signal", string(postgres.SignalAuto), "how a standby learns of a change: auto (LISTEN/NOTIFY, polling where notifications do not arrive), notify, or poll (every --retry-period)")
	docMeaning(fs, "postgres-signal", "how a standby learns of a change: `notify` (LISTEN/NOTIFY, in milliseconds), `poll` (reads the record every `--retry-period`; for a transaction-mode pooler such as PgBouncer), or `auto` (`notify`, checked with a test notification at start, else `poll`)")
}

// urlFromEnv takes the connection string from LEADER_SIDECAR_POSTGRES_URL,
// the sidecar's variable, unless --postgres-url was given: sidecar reset
// and sidecar status, which read no other variable of the sidecar's, take
// this one so that the password stays off their command line too.
func (c *postgresConfig) urlFromEnv(fs *pflag.FlagSet, environ []string) {
	if fs.Changed("postgres-url") {
		return
	}
	if v, ok := lookup(environ, envName("postgres-url")); ok {
		c.url = v
	}
}

// check validates the flags; with used (--backend postgres), it also
// checks that the connection string parses, naming the problem and never
// the string.
func (c *postgresConfig) check(used bool) error {
	if !slices.Contains(postgres.Signals, postgres.Signal(c.signal)) {
		var names []string
		for _, s := range postgres.Signals {
			names = append(names, string(s))
		}
		return oneOf("--postgres-signal", c.signal, names)
	}
	if c.table == "" {
		return fmt.Errorf("--postgres-table: must not be empty")
	}
	if !used {
		return nil
	}
	if err := postgres.CheckURL(c.url); err != nil {
		return fmt.Errorf("--postgres-url: %w", err)
	}
	return nil
}

func openPostgres(ctx context.Context, cfg electionConfig, _ *kubeclient.Clients, log *slog.Logger) (*store, error) {
	b, err := postgres.Open(ctx, postgresOptions(cfg, log))
	if err != nil {
		return nil, fmt.Errorf("--postgres-url: %w", err)
	}
	return &store{backend: b, lease: cfg.leaseName, close: func() { _ = b.Close() }}, nil
}

// openPostgresTable opens the table of a shard group's records once:
// every record's handle (Election) shares its pool of connections and its
// one listening connection, so N shards open no more connections than one
// election.
func openPostgresTable(ctx context.Context, cfg electionConfig, log *slog.Logger) (*postgres.Table, error) {
	t, err := postgres.OpenTable(ctx, postgresOptions(cfg, log))
	if err != nil {
		return nil, fmt.Errorf("--postgres-url: %w", err)
	}
	return t, nil
}

// postgresOptions are the backend's options of cfg's election.
func postgresOptions(cfg electionConfig, log *slog.Logger) postgres.Options {
	return postgres.Options{
		URL:          cfg.postgres.url,
		Schema:       cfg.postgres.schema,
		Table:        cfg.postgres.table,
		Election:     cfg.leaseName,
		Signal:       postgres.Signal(cfg.postgres.signal),
		PollInterval: cfg.retryPeriod,
		Logger:       log,
	}
}

// keyValuePassword is a password in libpq's key=value form, quoted or not.
var keyValuePassword = regexp.MustCompile(`password\s*=\s*('(\\.|[^'])*'|\S*)`)

// redactPostgresURL hides the password of a connection string, in a URL's
// userinfo or password parameter, or in key=value pairs.
func redactPostgresURL(raw string) string {
	if strings.HasPrefix(raw, "postgres://") || strings.HasPrefix(raw, "postgresql://") {
		u, err := url.Parse(raw)
		if err != nil {
			return "(a URL that does not parse; not shown)"
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	return keyValuePassword.ReplaceAllString(raw, "password=xxxxx")
}
