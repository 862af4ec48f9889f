package fencesuite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"
)

// The SQL tests run on SQLite and on a throwaway PostgreSQL server that the
// first test needing it starts, and that TestMain stops after the last test.
// Missing PostgreSQL binaries fail those tests; they are never skipped.

// pgServer is a running PostgreSQL server of the tests.
type pgServer struct {
	dsn  string
	stop func() error
}

// startPostgres starts a server; the platform file sets it.
var startPostgres = func() (*pgServer, error) {
	return nil, errors.New("the PostgreSQL tests start their server on Linux only")
}

var pg struct {
	once   sync.Once
	server *pgServer
	err    error
}

// postgresDSN starts the tests' server if it is not running yet, and
// returns how to reach it; the test fails if it cannot be started.
func postgresDSN(t *testing.T) string {
	t.Helper()
	pg.once.Do(func() {
		start := time.Now()
		pg.server, pg.err = startPostgres()
		if pg.err == nil && testing.Verbose() {
			fmt.Fprintf(os.Stderr, "PostgreSQL up in %v\n", time.Since(start).Round(time.Millisecond))
		}
	})
	if pg.err != nil {
		t.Fatalf("PostgreSQL for the tests: %v", pg.err)
	}
	return pg.server.dsn
}

func openPostgres(t *testing.T) *sql.DB {
	db, err := sql.Open("pgx", postgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// withPostgres runs the tests, then stops the server if one was started.
type withPostgres struct{ m *testing.M }

func (w withPostgres) Run() int {
	code := w.m.Run()
	if pg.server != nil {
		if err := pg.server.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping PostgreSQL: %v\n", err)
			code = 1
		}
	}
	return code
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(withPostgres{m})
}
