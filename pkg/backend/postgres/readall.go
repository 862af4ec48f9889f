package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// ReadAll returns the record and version of every election in the table
// that opts names (URL, Schema, Table; Election is not used), sorted by
// name, over one connection and in one read-only transaction, as sidecar
// status shows them. Unlike Open it creates nothing: a table that does
// not exist is an error that names it. Errors never hold the password.
func ReadAll(ctx context.Context, opts Options) ([]backend.Listed, error) {
	config, err := parse(opts.URL)
	if err != nil {
		return nil, err
	}
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	c, err := pgconn.ConnectConfig(ctx, config)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %s", scrubURLs(err.Error()))
	}
	defer func() { _ = c.Close(context.Background()) }()
	schema := opts.Schema
	if schema == "" {
		rows, err := run(ctx, c, `SELECT coalesce(current_schema(), '')`)
		if err != nil {
			return nil, fmt.Errorf("postgres: finding the schema: %w", err)
		}
		if schema = string(rows[0][0]); schema == "" {
			return nil, fmt.Errorf("postgres: the search_path names no schema that exists; set one")
		}
	}
	n := namesFor(schema, opts.Table)
	if _, err := run(ctx, c, `BEGIN READ ONLY`); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer func() { _, _ = run(context.Background(), c, `ROLLBACK`) }()
	exists, err := run(ctx, c, `SELECT to_regclass($1) IS NOT NULL`, text(n.table))
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if string(exists[0][0]) != "t" {
		return nil, fmt.Errorf("postgres: table %s.%s does not exist: no sidecar has used it", schema, opts.Table)
	}
	rows, err := run(ctx, c, `SELECT name, `+columns+` FROM `+n.table+` ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("postgres: reading %s.%s: %w", schema, opts.Table, err)
	}
	all, err := listed(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: reading %s.%s: %w", schema, opts.Table, err)
	}
	return all, nil
}
