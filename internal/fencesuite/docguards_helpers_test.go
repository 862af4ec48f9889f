package fencesuite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// The guards of docs/fencing.md, each run as the page writes it: the
// marked block is read from the page and sent to the store unchanged (only
// the table name, or the placeholders of the etcd transaction, filled in).

// docGuard is a store's documented guard, with an application's data next
// to it, in a namespace (tables, key prefix) of one test.
type docGuard interface {
	// write makes the application's write of value to resource, fenced by
	// term, in one atomic step as the page says. It returns nil if the
	// write landed; an error wrapping fence.ErrStaleToken (ErrTokenReused
	// for an equal token from another holder) that names the accepted term
	// if the guard refused it; any other error if the store failed.
	write(ctx context.Context, resource string, term fence.TermID, value string) error
	// state returns the resource's value and the term its guard records
	// (zero values where none).
	state(t *testing.T, resource string) (string, fence.TermID)
}

// guardedStore is one store whose guard the page documents.
type guardedStore struct {
	name string
	open func(t *testing.T) docGuard
}

var guardedStores = []guardedStore{
	{"sqlite", sqliteDialect.openGuard},
	{"postgres", postgresDialect.openGuard},
	{"mariadb", mariadbDialect.openGuard},
	{"redis", openRedisGuard},
	{"etcd", openEtcdGuard},
}

func forEachGuardedStore(t *testing.T, test func(t *testing.T, s guardedStore)) {
	for _, s := range guardedStores {
		t.Run(s.name, func(t *testing.T) { test(t, s) })
	}
}

// refused is the error of a guard that refused term because accepted was
// recorded before: the same words as fence's guards.
func refused(resource string, accepted, term fence.TermID) error {
	if accepted.Token == term.Token {
		return fmt.Errorf("%w: resource %q accepted token %d from holder %q, this write has it from holder %q",
			fence.ErrTokenReused, resource, term.Token, accepted.Holder, term.Holder)
	}
	return fmt.Errorf("%w: resource %q accepted %v, this write has %v", fence.ErrStaleToken, resource, accepted, term)
}

// sqlDialect is what differs between the SQL databases around the page's
// statements: the application's own table and the placeholders.
type sqlDialect struct {
	name   string // the page's name for the database
	open   func(t *testing.T) *sql.DB
	param  func(n int) string
	data   string // CREATE TABLE for the application's table %[1]s
	upsert string // the application's write into %[1]s: resource, value
	// retry reports whether the page says to roll back and retry err.
	retry func(err error) bool
}

var (
	sqliteDialect = sqlDialect{
		name: "sqlite", open: openSQLite, param: dollar,
		data:   "CREATE TABLE %[1]s (resource TEXT PRIMARY KEY, value TEXT NOT NULL)",
		upsert: "INSERT INTO %[1]s (resource, value) VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE SET value = excluded.value",
		retry:  func(error) bool { return false },
	}
	postgresDialect = sqlDialect{
		name: "postgres", open: openPostgres, param: dollar,
		data: sqliteDialect.data, upsert: sqliteDialect.upsert,
		retry: func(error) bool { return false },
	}
	mariadbDialect = sqlDialect{
		name: "mariadb", open: openMariaDB, param: func(int) string { return "?" },
		data:   "CREATE TABLE %[1]s (resource VARCHAR(255) PRIMARY KEY, value TEXT NOT NULL)",
		upsert: "INSERT INTO %[1]s (resource, value) VALUES (?, ?) ON DUPLICATE KEY UPDATE value = VALUES(value)",
		retry: func(err error) bool {
			var e *mysql.MySQLError
			return errors.As(err, &e) && e.Number == 1213 // deadlock: the page says retry
		},
	}
)

func dollar(n int) string { return "$" + strconv.Itoa(n) }

func openMariaDB(t *testing.T) *sql.DB {
	db, err := sql.Open("mysql", mariadbServer.address(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// sqlGuard is the page's table and guard statement for one database.
type sqlGuard struct {
	dialect sqlDialect
	db      *sql.DB
	check   string // the page's guard statement on this test's table
	fence   string // this test's guard table
	data    string // this test's application table
	retried atomic.Int64
}

// retries counts the writes retried as the page says (MariaDB deadlocks).
func (g *sqlGuard) retries() int64 { return g.retried.Load() }

func (d sqlDialect) openGuard(t *testing.T) docGuard {
	t.Helper()
	n := tables.Add(1)
	g := &sqlGuard{dialect: d, db: d.open(t), fence: fmt.Sprintf("fence_tokens_g%d", n), data: fmt.Sprintf("app_values_g%d", n)}
	ctx := t.Context()
	if _, err := g.db.ExecContext(ctx, ownTable(t, docBlock(t, "ddl", d.name, "sql"), g.fence)); err != nil {
		t.Fatalf("the documented CREATE TABLE for %s: %v", d.name, err)
	}
	if _, err := g.db.ExecContext(ctx, fmt.Sprintf(d.data, g.data)); err != nil {
		t.Fatal(err)
	}
	g.check = ownTable(t, docBlock(t, "guard", d.name, "sql"), g.fence)
	return g
}

func (g *sqlGuard) write(ctx context.Context, resource string, term fence.TermID, value string) error {
	for attempt := 1; ; attempt++ {
		err := g.writeOnce(ctx, resource, term, value)
		if err == nil || attempt == 20 || !g.dialect.retry(err) {
			return err
		}
		g.retried.Add(1)
	}
}

// writeOnce is the page's recipe: the guard statement first in the write's
// transaction, the write and commit only if it changed a row.
func (g *sqlGuard) writeOnce(ctx context.Context, resource string, term fence.TermID, value string) error {
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, g.check, resource, term.Token, term.Holder)
	if err != nil {
		return fmt.Errorf("the documented guard statement with %v: %w", term, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		var accepted fence.TermID
		if err := tx.QueryRowContext(ctx, "SELECT token, holder FROM "+g.fence+" WHERE resource = "+g.dialect.param(1),
			resource).Scan(&accepted.Token, &accepted.Holder); err != nil {
			return fmt.Errorf("refused %v, and reading the accepted term: %w", term, err)
		}
		return refused(resource, accepted, term)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(g.dialect.upsert, g.data), resource, value); err != nil {
		return err
	}
	return tx.Commit()
}

func (g *sqlGuard) state(t *testing.T, resource string) (string, fence.TermID) {
	t.Helper()
	var value string
	var term fence.TermID
	p := g.dialect.param(1)
	if err := g.db.QueryRow("SELECT value FROM "+g.data+" WHERE resource = "+p, resource).Scan(&value); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	if err := g.db.QueryRow("SELECT token, holder FROM "+g.fence+" WHERE resource = "+p, resource).Scan(&term.Token, &term.Holder); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return value, term
}

// redisGuard runs the page's Lua script with EVAL, each write on a
// connection of its own while others are in use.
type redisGuard struct {
	socket, script, prefix string

	mu   sync.Mutex
	idle []*respConn
}

func openRedisGuard(t *testing.T) docGuard {
	t.Helper()
	g := &redisGuard{socket: redisServer.address(t), script: docBlock(t, "guard", "redis", "lua"),
		prefix: fmt.Sprintf("t%d:", tables.Add(1))}
	t.Cleanup(func() {
		for _, c := range g.idle {
			c.close()
		}
	})
	return g
}

// keys are the resource's fence and data keys, with one hash tag as the
// page says.
func (g *redisGuard) keys(resource string) (fenceKey, dataKey string) {
	tag := g.prefix + "{" + resource + "}"
	return tag + ":fence", tag + ":data"
}

func (g *redisGuard) do(args ...string) (any, error) {
	g.mu.Lock()
	var c *respConn
	if n := len(g.idle); n > 0 {
		c, g.idle = g.idle[n-1], g.idle[:n-1]
	}
	g.mu.Unlock()
	if c == nil {
		var err error
		if c, err = dialRedis(g.socket); err != nil {
			return nil, err
		}
	}
	reply, err := c.do(args...)
	var answered respError
	if err != nil && !errors.As(err, &answered) {
		c.close() // the connection's state is unknown
		return nil, err
	}
	g.mu.Lock()
	g.idle = append(g.idle, c)
	g.mu.Unlock()
	return reply, err
}

func (g *redisGuard) write(_ context.Context, resource string, term fence.TermID, value string) error {
	fenceKey, dataKey := g.keys(resource)
	reply, err := g.do("EVAL", g.script, "2", fenceKey, dataKey, strconv.FormatInt(term.Token, 10), term.Holder, value)
	if err != nil {
		return fmt.Errorf("the documented script with %v: %w", term, err)
	}
	r, ok := reply.([]any)
	if len(r) != 3 || !ok {
		return fmt.Errorf("the documented script answered %#v, want {0|1, token, holder}", reply)
	}
	landed, _ := r[0].(int64)
	token, _ := r[1].(string)
	holder, _ := r[2].(string)
	got, err := strconv.ParseInt(token, 10, 64)
	if err != nil {
		return fmt.Errorf("the documented script answered token %q: %v", token, err)
	}
	if landed == 1 {
		if got != term.Token || holder != term.Holder {
			return fmt.Errorf("the documented script wrote token %d of %q for %v", got, holder, term)
		}
		return nil
	}
	return refused(resource, fence.TermID{Token: got, Holder: holder}, term)
}

func (g *redisGuard) state(t *testing.T, resource string) (string, fence.TermID) {
	t.Helper()
	fenceKey, dataKey := g.keys(resource)
	value, err := g.do("GET", dataKey)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := g.do("HMGET", fenceKey, "token", "holder")
	if err != nil {
		t.Fatal(err)
	}
	var term fence.TermID
	if f, _ := stored.([]any); len(f) == 2 && f[0] != nil {
		token, _ := f[0].(string)
		term.Holder, _ = f[1].(string)
		if term.Token, err = strconv.ParseInt(token, 10, 64); err != nil {
			t.Fatalf("fence hash token %q: %v", token, err)
		}
	}
	s, _ := value.(string)
	return s, term
}

// etcdGuard posts the page's transaction to etcd's JSON gateway.
type etcdGuard struct {
	url, txn, prefix string
	client           *http.Client
}

// etcdPlaceholders are the names the page's transaction is written with.
var etcdPlaceholders = []string{"FENCE_KEY", "TOKEN", "TERM", "DATA_KEY", "DATA_VALUE"}

func openEtcdGuard(t *testing.T) docGuard {
	t.Helper()
	g := &etcdGuard{url: etcdServer.address(t), txn: docBlock(t, "guard", "etcd", "json"),
		prefix: fmt.Sprintf("t%d/", tables.Add(1)), client: &http.Client{}}
	for _, p := range etcdPlaceholders {
		if !strings.Contains(g.txn, `"`+p+`"`) {
			t.Fatalf("the documented etcd transaction has no %q", p)
		}
	}
	t.Cleanup(g.client.CloseIdleConnections)
	return g
}

// etcdToken is a token as the page stores it: 19 digits, zero-padded.
func etcdToken(token int64) string { return fmt.Sprintf("%019d", token) }

// etcdTerm is a term as the page stores it in the fence key.
func etcdTerm(term fence.TermID) string { return etcdToken(term.Token) + " " + term.Holder }

func parseEtcdTerm(stored string) (fence.TermID, error) {
	token, holder, ok := strings.Cut(stored, " ")
	n, err := strconv.ParseInt(token, 10, 64)
	if !ok || err != nil || len(token) != 19 {
		return fence.TermID{}, fmt.Errorf("fence key holds %q, want 19 digits, a space and a holder", stored)
	}
	return fence.TermID{Token: n, Holder: holder}, nil
}

func (g *etcdGuard) keys(resource string) (fenceKey, dataKey string) {
	return g.prefix + "fence/" + resource, g.prefix + "data/" + resource
}

// post sends body to the gateway's path and decodes its JSON answer.
func (g *etcdGuard) post(ctx context.Context, path, body string, answer any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(raw))
	}
	if err := json.Unmarshal(raw, answer); err != nil {
		return fmt.Errorf("POST %s answered %s: %w", path, raw, err)
	}
	return nil
}

// etcdRange is the gateway's answer to a range request.
type etcdRange struct {
	Kvs []struct {
		Value []byte `json:"value"`
	} `json:"kvs"`
}

func (g *etcdGuard) write(ctx context.Context, resource string, term fence.TermID, value string) error {
	fenceKey, dataKey := g.keys(resource)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	body := strings.NewReplacer(
		`"FENCE_KEY"`, `"`+b64(fenceKey)+`"`,
		`"TOKEN"`, `"`+b64(etcdToken(term.Token))+`"`,
		`"TERM"`, `"`+b64(etcdTerm(term))+`"`,
		`"DATA_KEY"`, `"`+b64(dataKey)+`"`,
		`"DATA_VALUE"`, `"`+b64(value)+`"`,
	).Replace(g.txn)
	var answer struct {
		Succeeded bool `json:"succeeded"`
		Responses []struct {
			ResponseRange *etcdRange `json:"response_range"`
		} `json:"responses"`
	}
	if err := g.post(ctx, "/v3/kv/txn", body, &answer); err != nil {
		return fmt.Errorf("the documented transaction with %v: %w", term, err)
	}
	if !answer.Succeeded {
		return nil // the failure branch: the term and the write recorded
	}
	if len(answer.Responses) != 1 || answer.Responses[0].ResponseRange == nil || len(answer.Responses[0].ResponseRange.Kvs) != 1 {
		return fmt.Errorf("refused %v, but the answer holds no accepted term: %+v", term, answer)
	}
	accepted, err := parseEtcdTerm(string(answer.Responses[0].ResponseRange.Kvs[0].Value))
	if err != nil {
		return err
	}
	return refused(resource, accepted, term)
}

func (g *etcdGuard) get(t *testing.T, key string) (string, bool) {
	t.Helper()
	var answer etcdRange
	body := fmt.Sprintf(`{"key": %q}`, base64.StdEncoding.EncodeToString([]byte(key)))
	if err := g.post(t.Context(), "/v3/kv/range", body, &answer); err != nil {
		t.Fatal(err)
	}
	if len(answer.Kvs) == 0 {
		return "", false
	}
	return string(answer.Kvs[0].Value), true
}

func (g *etcdGuard) state(t *testing.T, resource string) (string, fence.TermID) {
	t.Helper()
	fenceKey, dataKey := g.keys(resource)
	value, _ := g.get(t, dataKey)
	stored, ok := g.get(t, fenceKey)
	if !ok {
		return value, fence.TermID{}
	}
	term, err := parseEtcdTerm(stored)
	if err != nil {
		t.Fatal(err)
	}
	return value, term
}
