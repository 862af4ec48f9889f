package pgtest_test

import (
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/pgtest"
)

// The pooler hands server sessions out per transaction: with one server
// session, what one client sets on its session outside a transaction is
// what another client's next statement finds, as in production behind a
// transaction-mode pooler (and why LISTEN cannot work there).
func TestPoolerSharesSessionsPerTransaction(t *testing.T) {
	s, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	p, err := pgtest.StartPooler(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping the pooler: %v", err)
		}
	})
	a, b := open(t, p.DSN), open(t, p.DSN)
	if _, err := a.ExecContext(t.Context(), `SET application_name = 'set_by_a'`); err != nil {
		t.Fatal(err)
	}
	var name string
	if err := b.QueryRowContext(t.Context(), `SHOW application_name`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != "set_by_a" {
		t.Fatalf("another client's session shows application_name %q, want the one client a set (one shared server session)", name)
	}
}
