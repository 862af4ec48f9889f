package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/postgres"
)

// opener opens handles on table in the test server, with opts for the
// rest.
func opener(table string, opts postgres.Options) backendtest.Opener {
	return func(t *testing.T, name string) backend.Backend {
		t.Helper()
		o := opts
		o.URL, o.Table, o.Election = server.Server(t).DSN, table, name
		b, err := postgres.Open(t.Context(), o)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
}

func TestConformanceNotify(t *testing.T) {
	backendtest.Run(t, opener("conformance_notify", postgres.Options{Signal: postgres.SignalNotify}),
		backendtest.CannotProveNeverCreated())
}

func TestConformanceAuto(t *testing.T) {
	backendtest.Run(t, opener("conformance_auto", postgres.Options{}), backendtest.CannotProveNeverCreated())
}

func TestConformancePoll(t *testing.T) {
	backendtest.Run(t, opener("conformance_poll", postgres.Options{Signal: postgres.SignalPoll, PollInterval: 20 * time.Millisecond}),
		backendtest.CannotProveNeverCreated())
}

func TestList(t *testing.T) {
	backendtest.RunList(t, opener("list", postgres.Options{}))
}

// exec runs stmt on the test server as the superuser.
func exec(t *testing.T, stmt string, args ...any) error {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), server.Server(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), stmt, args...)
	return err
}

// TestRecordsAreNeverDeleted: a DELETE, a TRUNCATE and a rename of a
// record are refused by the table's triggers with a message that says
// why, and the record is still there; Open puts back a trigger dropped by
// hand.
func TestRecordsAreNeverDeleted(t *testing.T) {
	b := opener("kept", postgres.Options{})(t, "billing")
	backendtest.AssertRecordEqual(t, mustCreateGet(t, b), backendtest.SampleRecord("a", 1))
	for _, stmt := range []string{
		`DELETE FROM kept`,
		`DELETE FROM kept WHERE name = 'billing'`,
		`TRUNCATE kept`,
		`UPDATE kept SET name = 'other' WHERE name = 'billing'`,
	} {
		err := exec(t, stmt)
		if err == nil || !strings.Contains(err.Error(), "never deleted") {
			t.Errorf("%s: got %v, want the refusal saying records are never deleted", stmt, err)
		}
	}
	if _, _, err := b.Get(t.Context()); err != nil {
		t.Fatalf("Get after the refused deletes: %v", err)
	}
	if err := exec(t, `DROP TRIGGER kept_kept_on_delete ON kept`); err != nil {
		t.Fatal(err)
	}
	opener("kept", postgres.Options{})(t, "billing")
	if err := exec(t, `DELETE FROM kept`); err == nil || !strings.Contains(err.Error(), "never deleted") {
		t.Errorf("DELETE after Open put the dropped trigger back: got %v, want the refusal", err)
	}
}

func mustCreateGet(t *testing.T, b backend.Backend) backend.Record {
	t.Helper()
	if _, err := b.Create(t.Context(), backendtest.SampleRecord("a", 1)); err != nil {
		t.Fatal(err)
	}
	rec, _, err := b.Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestSchemaAndTableAreSettable: two tables of the same name in two
// schemas hold separate records, and Describe names the one it uses.
func TestSchemaAndTableAreSettable(t *testing.T) {
	if err := exec(t, `CREATE SCHEMA IF NOT EXISTS "ops team"`); err != nil {
		t.Fatal(err)
	}
	a := opener("Leader Records", postgres.Options{Schema: "ops team"})(t, "e")
	b := opener("Leader Records", postgres.Options{})(t, "e")
	if _, err := a.Create(t.Context(), backendtest.SampleRecord("a", 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(t.Context()); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get in the other schema: %v, want ErrNotFound", err)
	}
	if got := a.Describe(); !strings.Contains(got, "/ops team.Leader Records#e") {
		t.Errorf("Describe = %q, want it to name the schema, table and election", got)
	}
}

// TestErrorsNeverHoldThePassword: a server that cannot be reached and a
// connection string that does not parse give errors that say what is
// wrong and never contain the password.
func TestErrorsNeverHoldThePassword(t *testing.T) {
	const password = "s3cret-Pa55word"
	for _, url := range []string{
		"postgres://app:" + password + "@/db?host=/nonexistent-dir&connect_timeout=2",
		"host=/nonexistent-dir user=app password=" + password + " connect_timeout=2",
		"postgres://app:" + password + "@host:notaport/db",
		"host=/x password='" + password + "' port=notaport",
	} {
		_, err := postgres.Open(t.Context(), postgres.Options{URL: url, Election: "e"})
		if err == nil {
			t.Fatalf("Open(%q) succeeded", url)
		}
		if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), "Pa55") {
			t.Errorf("Open's error holds the password: %v", err)
		}
		t.Logf("%v", err)
	}
}

// TestNotifySignalsInMilliseconds: with LISTEN/NOTIFY, a standby's Watch
// signals another handle's write well within a poll interval of an hour.
func TestNotifySignalsInMilliseconds(t *testing.T) {
	open := opener("notify_speed", postgres.Options{Signal: postgres.SignalNotify, PollInterval: time.Hour})
	standby, writer := open(t, "e"), open(t, "e")
	changes := standby.Watch(t.Context())
	<-changes // the signal every (re)started listener gives
	v, err := writer.Create(t.Context(), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	var worst time.Duration
	for i := range 20 {
		began := time.Now()
		if v, err = writer.Update(t.Context(), v, backendtest.SampleRecord("a", int64(i+2))); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changes:
			worst = max(worst, time.Since(began))
		case <-time.After(10 * time.Second):
			t.Fatalf("no signal within 10s of write %d", i)
		}
	}
	t.Logf("slowest of 20 signals after the write: %v", worst)
	if worst > 2*time.Second {
		t.Errorf("slowest signal %v after the write, want milliseconds", worst)
	}
}

// TestAutoSignalFallsBackToPolling: where notifications never arrive (here
// the listening connection is in another database, as a transaction-mode
// pooler hands it to another client), SignalAuto notices at start, says so
// in the log, and polls: a write is still signalled. SignalNotify, told
// the same, never signals the write.
func TestAutoSignalFallsBackToPolling(t *testing.T) {
	if err := exec(t, `CREATE DATABASE elsewhere`); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	auto := postgres.ListenInDatabase(postgres.Options{PollInterval: 50 * time.Millisecond, ProbeTimeout: 200 * time.Millisecond, Logger: log}, "elsewhere")
	notify := postgres.ListenInDatabase(postgres.Options{Signal: postgres.SignalNotify, PollInterval: time.Hour}, "elsewhere")
	writer := opener("fallback", postgres.Options{})(t, "e")
	v, err := writer.Create(t.Context(), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	autoChanges := opener("fallback", auto)(t, "e").Watch(t.Context())
	notifyChanges := opener("fallback", notify)(t, "e").Watch(t.Context())
	<-notifyChanges // the signal every listener gives at start
	deadline := time.After(10 * time.Second)
	for !strings.Contains(logs.String(), "polling instead") {
		select {
		case <-deadline:
			t.Fatalf("SignalAuto did not fall back to polling; log:\n%s", logs.String())
		case <-autoChanges:
		case <-time.After(10 * time.Millisecond):
		}
	}
	// Signals may be spurious (the poller's first read gives one), so only
	// the second and later rounds prove that a write produced a signal.
	for round := range 3 {
		if v, err = writer.Update(t.Context(), v, backendtest.SampleRecord("b", int64(round+2))); err != nil {
			t.Fatal(err)
		}
		select {
		case <-autoChanges:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: SignalAuto, polling, did not signal the write within 10s", round)
		}
	}
	select {
	case <-notifyChanges:
		t.Fatal("SignalNotify signalled a write whose notification cannot arrive: the test does not cut notifications")
	case <-time.After(300 * time.Millisecond):
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
