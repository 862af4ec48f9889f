package pgtest_test

import (
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/pgtest"
)

// A restart ends every session, keeps every commit, and serves the same
// DSN again once it is back.
func TestRestartKeepsCommitsAndEndsSessions(t *testing.T) {
	s, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping the server: %v", err)
		}
	})
	db := open(t, s.DSN)
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE rows (n INT)`); err != nil {
		t.Fatal(err)
	}
	if err := insert(t, db, 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.PingContext(t.Context()); err != nil { // a session open before the restart
		t.Fatal(err)
	}
	if err := s.Restart(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(t.Context(), `SELECT 1`).Scan(new(int)); err == nil {
		t.Fatal("a session from before the restart still answers")
	}
	if got := rowsOn(t, open(t, s.DSN)); got != 1 {
		t.Fatalf("after the restart: %d rows, want the 1 committed before", got)
	}
}
