package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Channel is the channel every table of records notifies on, with the
// payload "<schema>.<table> <election>".
const Channel = "leader_sidecar"

// keptMessage is the error of a DELETE, TRUNCATE or rename of a record.
const keptMessage = `leader-sidecar: the record of an election is never deleted (a holder may still run, ` +
	`and a new record would restart its token); to end an election, stop its sidecars and leave the row`

// schemaLock serializes the Opens that create the schema, so concurrent
// first Opens do not race on CREATE TABLE IF NOT EXISTS.
const schemaLock = `SELECT pg_advisory_xact_lock(hashtext('leader-sidecar schema'))`

// names are the quoted, qualified names of the schema's objects for one
// table.
type names struct {
	table, kept, notify                        string
	keptOnDelete, keptOnTruncate, keptOnRename string
	notifyOnWrite                              string
}

func namesFor(schema, table string) names {
	q := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	return names{
		table:          q(table),
		kept:           q(table + "_kept"),
		notify:         q(table + "_notify"),
		keptOnDelete:   table + "_kept_on_delete",
		keptOnTruncate: table + "_kept_on_truncate",
		keptOnRename:   table + "_kept_on_rename",
		notifyOnWrite:  table + "_notify_on_write",
	}
}

// ddl are the statements that create what is missing: the table, the
// functions and the four triggers (replaced, so a trigger dropped or
// disabled by hand comes back).
func (n names) ddl() []string {
	trigger := func(name string) string { return pgx.Identifier{name}.Sanitize() }
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + n.table + ` (
	name                   TEXT PRIMARY KEY,
	version                BIGINT GENERATED ALWAYS AS IDENTITY,
	holder                 TEXT NOT NULL,
	lease_duration_seconds INTEGER NOT NULL,
	acquire_time           TIMESTAMPTZ,
	renew_time             TIMESTAMPTZ,
	transitions            BIGINT NOT NULL,
	handoff                TEXT NOT NULL DEFAULT '',
	group_mark             TEXT NOT NULL DEFAULT ''
)`,
		`CREATE OR REPLACE FUNCTION ` + n.kept + `() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	RAISE EXCEPTION '` + keptMessage + `' USING ERRCODE = 'restrict_violation';
END $fn$`,
		`CREATE OR REPLACE FUNCTION ` + n.notify + `() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	PERFORM pg_notify('` + Channel + `', TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME || ' ' || NEW.name);
	RETURN NULL;
END $fn$`,
		`DROP TRIGGER IF EXISTS ` + trigger(n.keptOnDelete) + ` ON ` + n.table,
		`CREATE TRIGGER ` + trigger(n.keptOnDelete) + ` BEFORE DELETE ON ` + n.table +
			` FOR EACH ROW EXECUTE FUNCTION ` + n.kept + `()`,
		`DROP TRIGGER IF EXISTS ` + trigger(n.keptOnTruncate) + ` ON ` + n.table,
		`CREATE TRIGGER ` + trigger(n.keptOnTruncate) + ` BEFORE TRUNCATE ON ` + n.table +
			` FOR EACH STATEMENT EXECUTE FUNCTION ` + n.kept + `()`,
		`DROP TRIGGER IF EXISTS ` + trigger(n.keptOnRename) + ` ON ` + n.table,
		`CREATE TRIGGER ` + trigger(n.keptOnRename) + ` BEFORE UPDATE OF name ON ` + n.table +
			` FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name) EXECUTE FUNCTION ` + n.kept + `()`,
		`DROP TRIGGER IF EXISTS ` + trigger(n.notifyOnWrite) + ` ON ` + n.table,
		`CREATE TRIGGER ` + trigger(n.notifyOnWrite) + ` AFTER INSERT OR UPDATE ON ` + n.table +
			` FOR EACH ROW EXECUTE FUNCTION ` + n.notify + `()`,
	}
}

// countTriggers counts the table's four triggers that are enabled.
const countTriggers = `SELECT count(*) FROM pg_trigger
	WHERE tgrelid = to_regclass($1) AND tgname = ANY($2) AND tgenabled <> 'D'`

// initSchema resolves the schema (the search_path's first when Options
// leaves it empty), then, under an advisory lock, creates the table,
// functions and triggers when any is missing or disabled, and proves the
// table can be written with an UPDATE that changes nothing. A user who
// may only read and write the table's rows can Open a table that is set
// up already.
func (b *Backend) initSchema(ctx context.Context) error {
	schema := b.opts.Schema
	if schema == "" {
		if err := b.pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			return fmt.Errorf("finding the schema: %w", err)
		}
		if schema == "" {
			return fmt.Errorf("the search_path names no schema that exists; set one")
		}
	}
	n := namesFor(schema, b.opts.Table)
	b.table, b.tableName = n.table, schema+"."+b.opts.Table

	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, schemaLock); err != nil {
		return err
	}
	var enabled int
	triggers := []string{n.keptOnDelete, n.keptOnTruncate, n.keptOnRename, n.notifyOnWrite}
	if err := tx.QueryRow(ctx, countTriggers, n.table, triggers).Scan(&enabled); err != nil {
		return fmt.Errorf("reading the table's triggers: %w", err)
	}
	if enabled < len(triggers) {
		for _, stmt := range n.ddl() {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("creating the table and its triggers: %w", err)
			}
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE `+n.table+` SET holder = holder WHERE false`); err != nil {
		return fmt.Errorf("checking that the table can be written: %w", err)
	}
	return tx.Commit(ctx)
}
