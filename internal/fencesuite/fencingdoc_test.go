package fencesuite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence/fencetest"
)

// fencingDoc is the page whose guards these tests run as it is written.
const fencingDoc = "../../docs/fencing.md"

// docBlockPattern matches a marker comment and the fenced block after it:
// <!-- fence:KIND STORES --> then ```LANGUAGE ... ```.
var docBlockPattern = regexp.MustCompile("(?s)<!-- fence:(\\w+) ([\\w ]+) -->\\s*```(\\w+)\\n(.*?)```")

// docBlock returns the documented block of kind ("ddl", "guard") for the
// store named store, failing unless the page has exactly one, written in
// language lang.
func docBlock(t *testing.T, kind, store, lang string) string {
	t.Helper()
	page, err := os.ReadFile(fencingDoc)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, m := range docBlockPattern.FindAllStringSubmatch(string(page), -1) {
		if m[1] == kind && slices.Contains(strings.Fields(m[2]), store) {
			if m[3] != lang {
				t.Fatalf("%s: the %q block for %s is %s, want %s", fencingDoc, kind, store, m[3], lang)
			}
			found = append(found, strings.TrimSpace(m[4]))
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s has %d %q blocks for %s, want 1", fencingDoc, len(found), kind, store)
	}
	return found[0]
}

// ownTable is stmt on a table of its own: the documented name fence_tokens
// replaced, so that tests sharing a PostgreSQL server do not collide.
func ownTable(t *testing.T, stmt, table string) string {
	t.Helper()
	if !strings.Contains(stmt, "fence_tokens") {
		t.Fatalf("the documented statement does not name fence_tokens:\n%s", stmt)
	}
	return strings.ReplaceAll(stmt, "fence_tokens", table)
}

func TestFencingDocHasEveryGuard(t *testing.T) {
	for _, db := range []string{"postgres", "sqlite", "mariadb"} {
		for _, kind := range []string{"ddl", "guard"} {
			docBlock(t, kind, db, "sql")
		}
	}
	docBlock(t, "guard", "redis", "lua")
	docBlock(t, "guard", "etcd", "json")
}

// The documented table and guard statement, run as written, answer every
// step of fencetest.GuardSteps as fence.SQLGuard does, leave the same term
// recorded after each, and make the same table.
func TestFencingDocSQLIsWhatSQLGuardDoes(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		ctx := t.Context()
		db := d.open(t)
		n := tables.Add(1)
		docTable, libTable := fmt.Sprintf("fence_tokens_doc_%d", n), fmt.Sprintf("fence_tokens_lib_%d", n)
		if _, err := db.ExecContext(ctx, ownTable(t, docBlock(t, "ddl", d.name, "sql"), docTable)); err != nil {
			t.Fatalf("the documented CREATE TABLE: %v", err)
		}
		guard, err := fence.NewSQLGuard(libTable)
		if err != nil {
			t.Fatal(err)
		}
		if err := guard.EnsureTable(ctx, db); err != nil {
			t.Fatal(err)
		}
		if doc, lib := columns(t, db, d.name, docTable), columns(t, db, d.name, libTable); !slices.Equal(doc, lib) {
			t.Fatalf("the documented table has columns\n%q\nfence.SQLGuard's\n%q", doc, lib)
		}
		check := ownTable(t, docBlock(t, "guard", d.name, "sql"), docTable)

		for _, s := range fencetest.GuardSteps() {
			if s.Want == fence.ErrInvalidToken {
				continue // refused before any SQL; see TestFencingDocTableRefusesNegativeTokens
			}
			t.Run(s.Name, func(t *testing.T) {
				docAccepted := docWrite(t, ctx, db, check, "billing", s.Term)
				libErr := libWrite(ctx, db, guard, "billing", s.Term)
				if err := fencetest.CheckAnswer(libErr, s.Term, s.Want); err != nil {
					t.Fatalf("fence.SQLGuard: %v", err)
				}
				if docAccepted != (libErr == nil) {
					t.Fatalf("%v: the documented statement accepted=%v, fence.SQLGuard answered %v", s.Term, docAccepted, libErr)
				}
				if doc, lib := recorded(t, db, docTable, "billing"), recorded(t, db, libTable, "billing"); doc != lib {
					t.Fatalf("after %v the documented table records %v, fence.SQLGuard's %v", s.Term, doc, lib)
				}
			})
		}
	})
}

func TestFencingDocTableRefusesNegativeTokens(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		db := d.open(t)
		table := fmt.Sprintf("fence_tokens_doc_%d", tables.Add(1))
		if _, err := db.ExecContext(t.Context(), ownTable(t, docBlock(t, "ddl", d.name, "sql"), table)); err != nil {
			t.Fatal(err)
		}
		check := ownTable(t, docBlock(t, "guard", d.name, "sql"), table)
		if _, err := db.ExecContext(t.Context(), check, "billing", -1, "app-1_1"); err == nil {
			t.Fatal("the documented table accepted token -1")
		}
	})
}

// docWrite runs the documented guard statement in a transaction as the
// page says: commit on one row affected, else roll back.
func docWrite(t *testing.T, ctx context.Context, db *sql.DB, check, resource string, term fence.TermID) bool {
	t.Helper()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, check, resource, term.Token, term.Holder)
	if err != nil {
		t.Fatalf("the documented guard statement with %v: %v", term, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		return false
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return true
}

func libWrite(ctx context.Context, db *sql.DB, guard *fence.SQLGuard, resource string, term fence.TermID) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := guard.Check(ctx, tx, resource, term); err != nil {
		return err
	}
	return tx.Commit()
}

func recorded(t *testing.T, db *sql.DB, table, resource string) fence.TermID {
	t.Helper()
	var term fence.TermID
	err := db.QueryRow("SELECT token, holder FROM "+table+" WHERE resource = $1", resource).Scan(&term.Token, &term.Holder)
	if err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	return term
}

// columns describes table's columns as the database reports them: name,
// type, nullability, default and key.
func columns(t *testing.T, db *sql.DB, kind, table string) []string {
	t.Helper()
	var q string
	switch kind {
	case "sqlite":
		q = "SELECT name || ' ' || type || ' notnull=' || \"notnull\" || ' default=' || coalesce(dflt_value, '-') || ' pk=' || pk" +
			" FROM pragma_table_info('" + table + "') ORDER BY cid"
	case "postgres":
		q = "SELECT column_name || ' ' || data_type || ' nullable=' || is_nullable || ' default=' || coalesce(column_default, '-')" +
			" FROM information_schema.columns WHERE table_name = '" + table + "' ORDER BY ordinal_position"
	}
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil || len(out) == 0 {
		t.Fatalf("columns of %s: %v (%d found)", table, err, len(out))
	}
	if kind == "postgres" {
		var checks int
		if err := db.QueryRow("SELECT count(*) FROM information_schema.check_constraints c JOIN information_schema.constraint_column_usage u"+
			" USING (constraint_name) WHERE u.table_name = $1 AND c.check_clause LIKE '%token >= 0%'", table).Scan(&checks); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("token checks=%d", checks))
		var pk string
		if err := db.QueryRow("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"+
			" WHERE i.indrelid = $1::regclass AND i.indisprimary", table).Scan(&pk); err != nil {
			t.Fatal(err)
		}
		out = append(out, "pk="+pk)
	}
	return out
}
