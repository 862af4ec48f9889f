package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

// quote is name as a quoted SQL identifier.
func quote(name string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(name, "\x00", ""), `"`, `""`) + `"`
}

// names are the quoted, qualified names of the schema's objects for one
// table, and its triggers' names.
type names struct {
	table, kept, notify                        string
	keptOnDelete, keptOnTruncate, keptOnRename string
	notifyOnWrite                              string
}

func namesFor(schema, table string) names {
	q := func(name string) string { return quote(schema) + "." + quote(name) }
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
		`DROP TRIGGER IF EXISTS ` + quote(n.keptOnDelete) + ` ON ` + n.table,
		`CREATE TRIGGER ` + quote(n.keptOnDelete) + ` BEFORE DELETE ON ` + n.table +
			` FOR EACH ROW EXECUTE FUNCTION ` + n.kept + `()`,
		`DROP TRIGGER IF EXISTS ` + quote(n.keptOnTruncate) + ` ON ` + n.table,
		`CREATE TRIGGER ` + quote(n.keptOnTruncate) + ` BEFORE TRUNCATE ON ` + n.table +
			` FOR EACH STATEMENT EXECUTE FUNCTION ` + n.kept + `()`,
		`DROP TRIGGER IF EXISTS ` + quote(n.keptOnRename) + ` ON ` + n.table,
		`CREATE TRIGGER ` + quote(n.keptOnRename) + ` BEFORE UPDATE OF name ON ` + n.table +
			` FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name) EXECUTE FUNCTION ` + n.kept + `()`,
		`DROP TRIGGER IF EXISTS ` + quote(n.notifyOnWrite) + ` ON ` + n.table,
		`CREATE TRIGGER ` + quote(n.notifyOnWrite) + ` AFTER INSERT OR UPDATE ON ` + n.table +
			` FOR EACH ROW EXECUTE FUNCTION ` + n.notify + `()`,
	}
}

// countTriggers counts the table's four triggers that are enabled.
const countTriggers = `SELECT count(*) FROM pg_trigger
	WHERE tgrelid = to_regclass($1) AND tgname IN ($2, $3, $4, $5) AND tgenabled <> 'D'`

// initSchema resolves the schema (the search_path's first when Options
// leaves it empty), then, in one transaction under an advisory lock,
// creates the table, functions and triggers when any is missing or
// disabled, and proves the table can be written with an UPDATE that
// changes nothing. A user who may only read and write the table's rows can
// Open a table that is set up already.
func (t *Table) initSchema(ctx context.Context) error {
	c, err := t.pool.get(ctx)
	if err != nil {
		return err
	}
	defer t.pool.put(c)
	schema := t.opts.Schema
	if schema == "" {
		rows, err := run(ctx, c, `SELECT coalesce(current_schema(), '')`)
		if err != nil {
			return fmt.Errorf("finding the schema: %w", err)
		}
		if schema = string(rows[0][0]); schema == "" {
			return fmt.Errorf("the search_path names no schema that exists; set one")
		}
	}
	n := namesFor(schema, t.opts.Table)
	t.table, t.tableName = n.table, schema+"."+t.opts.Table

	if _, err := run(ctx, c, `BEGIN`); err != nil {
		return err
	}
	defer func() { _, _ = run(context.Background(), c, `ROLLBACK`) }()
	if _, err := run(ctx, c, schemaLock); err != nil {
		return err
	}
	rows, err := run(ctx, c, countTriggers, text(n.table), text(n.keptOnDelete), text(n.keptOnTruncate),
		text(n.keptOnRename), text(n.notifyOnWrite))
	if err != nil {
		return fmt.Errorf("reading the table's triggers: %w", err)
	}
	if enabled, _ := strconv.Atoi(string(rows[0][0])); enabled < 4 {
		for _, stmt := range n.ddl() {
			if _, err := run(ctx, c, stmt); err != nil {
				return fmt.Errorf("creating the table and its triggers: %w", err)
			}
		}
	}
	if _, err := run(ctx, c, `UPDATE `+n.table+` SET holder = holder WHERE false`); err != nil {
		return fmt.Errorf("checking that the table can be written: %w", err)
	}
	_, err = run(ctx, c, `COMMIT`)
	return err
}
