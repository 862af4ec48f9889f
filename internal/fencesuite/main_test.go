package fencesuite_test

import (
	"database/sql"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The guard tests run on throwaway servers (PostgreSQL, MariaDB, Redis,
// etcd) that the first test needing each starts, and that TestMain stops
// after the last test. A missing server binary fails those tests; they are
// never skipped.

// testServer is one kind of throwaway server of the tests, started at most
// once per test binary.
type testServer struct {
	name string
	// start starts the server; the platform files set it.
	start   func() (*runningServer, error)
	once    sync.Once
	running *runningServer
	err     error
}

// runningServer is a started server: how to reach it, and how to stop it.
type runningServer struct {
	addr string
	stop func() error
}

func notOnThisPlatform(name string) func() (*runningServer, error) {
	return func() (*runningServer, error) {
		return nil, fmt.Errorf("the %s tests start their server on Linux only", name)
	}
}

var (
	postgresServer = &testServer{name: "PostgreSQL", start: notOnThisPlatform("PostgreSQL")}
	mariadbServer  = &testServer{name: "MariaDB", start: notOnThisPlatform("MariaDB")}
	redisServer    = &testServer{name: "Redis", start: notOnThisPlatform("Redis")}
	etcdServer     = &testServer{name: "etcd", start: notOnThisPlatform("etcd")}
	testServers    = []*testServer{postgresServer, mariadbServer, redisServer, etcdServer}
)

// address starts the server if it is not running yet, and returns how to
// reach it; the test fails if it cannot be started.
func (s *testServer) address(t *testing.T) string {
	t.Helper()
	s.once.Do(func() {
		began := time.Now()
		s.running, s.err = s.start()
		if s.err == nil && testing.Verbose() {
			fmt.Fprintf(os.Stderr, "%s up in %v\n", s.name, time.Since(began).Round(time.Millisecond))
		}
	})
	if s.err != nil {
		t.Fatalf("%s for the tests: %v", s.name, s.err)
	}
	return s.running.addr
}

// postgresDSN returns how to reach the tests' PostgreSQL server.
func postgresDSN(t *testing.T) string { return postgresServer.address(t) }

func openPostgres(t *testing.T) *sql.DB {
	db, err := sql.Open("pgx", postgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// withServers builds the sidecar binary (sidecartest.Main), runs the
// tests, then stops every server that was started.
type withServers struct{ m *testing.M }

func (w withServers) Run() int {
	code := sidecartest.Main(w.m)
	for _, s := range testServers {
		if s.running == nil {
			continue
		}
		if err := s.running.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping %s: %v\n", s.name, err)
			code = 1
		}
	}
	return code
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(withServers{m})
}
