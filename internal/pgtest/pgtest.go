// Package pgtest starts a throwaway PostgreSQL server for tests: initdb
// into a temporary directory, then postgres listening on a Unix socket in
// that directory only (no TCP port, so servers of several test binaries
// never collide). A test that needs PostgreSQL fails, never skips, when
// the server binaries are missing: Start says how to install them.
//
// A test binary starts one server (Once) and stops it in TestMain; each
// test works in tables or databases of its own. A failover test starts a
// Pair of its own: a primary and a streaming standby made from it with
// pg_basebackup, replicated synchronously or not, whose standby it can cut
// off and promote after crashing the primary.
package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// InstallHint says how to get the server binaries.
const InstallHint = "install the Debian package: apt-get update && apt-get install -y postgresql"

// Server is a running throwaway server.
type Server struct {
	// DSN reaches the server as user postgres, database postgres, in the
	// keyword/value form libpq and pgx read.
	DSN string
	// SocketDir is the directory of the server's Unix socket (port 5432).
	SocketDir string
	// LogPath is the server's log file.
	LogPath string
	stop    func() error
	crash   func() error
	halt    func() error
	resume  func() (*Server, error)
}

// URL is the server's address as a postgres:// URL (the socket directory
// in the host parameter), for a database name.
func (s *Server) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=5432&sslmode=disable", database, s.SocketDir)
}

// Stop stops the server (a fast shutdown) and removes its directory.
func (s *Server) Stop() error { return s.stop() }

// Restart stops the server as an operator's restart does (a fast
// shutdown: every session is ended, every commit kept), leaves it down for
// down, and starts it again on the same data directory and socket, so the
// DSN and URLs stay valid. Not safe to call concurrently with Stop.
func (s *Server) Restart(down time.Duration) error {
	if err := s.Halt(); err != nil {
		return err
	}
	time.Sleep(down)
	return s.Resume()
}

// Halt stops the server as Restart does, leaving it down until Resume.
func (s *Server) Halt() error { return s.halt() }

// Resume starts a halted server again on the same data directory and
// socket.
func (s *Server) Resume() error {
	next, err := s.resume()
	if err != nil {
		return err
	}
	*s = *next
	return nil
}

// Start starts a server; see the package doc. The server is a child of the
// test binary that the kernel kills if the binary dies before Stop.
func Start() (*Server, error) { return start() }

// Once starts a server at most once per test binary.
type Once struct {
	once    sync.Once
	running *Server
	err     error
}

// Server starts the server if it is not running yet and returns it; the
// test fails if it cannot be started.
func (o *Once) Server(t testing.TB) *Server {
	t.Helper()
	o.once.Do(func() {
		began := time.Now()
		o.running, o.err = Start()
		if o.err == nil && testing.Verbose() {
			fmt.Fprintf(os.Stderr, "PostgreSQL up in %v\n", time.Since(began).Round(time.Millisecond))
		}
	})
	if o.err != nil {
		t.Fatalf("PostgreSQL for the tests: %v", o.err)
	}
	return o.running
}

// Stop stops the server if Server started it.
func (o *Once) Stop() error {
	if o.running == nil {
		return nil
	}
	return o.running.Stop()
}

// waitReady polls until the server accepts a connection.
func waitReady(dsn string, exited <-chan error) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("postgres exited at start: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready within 30s: %w", err)
		}
	}
}
