package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// tableOpener opens handles on the elections of one Table per test, as a
// shard group's replica does: every handle a test opens shares the
// table's pool and change signal.
func tableOpener(table string, opts postgres.Options) backendtest.Opener {
	var mu sync.Mutex
	tables := map[*testing.T]*postgres.Table{}
	return func(t *testing.T, name string) backend.Backend {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		tb, ok := tables[t]
		if !ok {
			o := opts
			o.URL, o.Table = server.Server(t).DSN, table
			var err error
			if tb, err = postgres.OpenTable(t.Context(), o); err != nil {
				t.Fatalf("OpenTable: %v", err)
			}
			tables[t] = tb
			t.Cleanup(func() {
				_ = tb.Close()
				mu.Lock()
				delete(tables, t)
				mu.Unlock()
			})
		}
		b := tb.Election(name)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
}

// The conformance suite with every handle of a test on one Table: the
// compare-and-swap and the change signal hold between handles that share
// the pool and the listening connection (or the poller).
func TestConformanceOneTableNotify(t *testing.T) {
	backendtest.Run(t, tableOpener("conformance_table_notify", postgres.Options{Signal: postgres.SignalNotify}),
		backendtest.CannotProveNeverCreated())
}

func TestConformanceOneTablePoll(t *testing.T) {
	backendtest.Run(t, tableOpener("conformance_table_poll", postgres.Options{Signal: postgres.SignalPoll, PollInterval: 20 * time.Millisecond}),
		backendtest.CannotProveNeverCreated())
}

func TestListOneTable(t *testing.T) {
	backendtest.RunList(t, tableOpener("list_table", postgres.Options{}))
}

// connections counts the server's connections whose application_name is
// app.
func connections(t *testing.T, app string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), server.Server(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOneTableOpensOnePoolAndOneListener: the 16 shard records and the
// member record of a group, on one Table, each watched and each read and
// written at once, open no more connections than one election does (the
// pool's 3 and one listening connection), counted in pg_stat_activity;
// and a write to one shard's record signals that shard's Watch, within a
// poll interval of an hour, and no other shard's.
func TestOneTableOpensOnePoolAndOneListener(t *testing.T) {
	for _, signal := range []postgres.Signal{postgres.SignalNotify, postgres.SignalPoll} {
		t.Run(string(signal), func(t *testing.T) {
			app := "one-table-" + string(signal)
			// quiet is how long without a signal shows that none is coming.
			poll, quiet := time.Hour, 500*time.Millisecond
			if signal == postgres.SignalPoll {
				poll = 50 * time.Millisecond
			}
			tb, err := postgres.OpenTable(t.Context(), postgres.Options{URL: server.Server(t).DSN + " application_name=" + app,
				Table: "one_table_" + string(signal), Signal: signal, PollInterval: poll})
			if err != nil {
				t.Fatal(err)
			}
			defer tb.Close()
			var handles []*postgres.Backend
			var watches []<-chan struct{}
			var versions []backend.Version
			for i := range 17 {
				name := fmt.Sprintf("g-shard-%d", i)
				if i == 16 {
					name = "g-member-a"
				}
				b := tb.Election(name)
				handles = append(handles, b)
				watches = append(watches, b.Watch(t.Context()))
				v, err := b.Create(t.Context(), backendtest.SampleRecord("a", 1))
				if err != nil {
					t.Fatal(err)
				}
				versions = append(versions, v)
			}
			var wg sync.WaitGroup
			for i, b := range handles {
				wg.Go(func() {
					for range 5 {
						if _, _, err := b.Get(t.Context()); err != nil {
							t.Error(err)
						}
					}
					v, err := b.Update(t.Context(), versions[i], backendtest.SampleRecord("a", 2))
					if err != nil {
						t.Error(err)
					}
					versions[i] = v
				})
			}
			wg.Wait()
			if n := connections(t, app); n > 4 {
				t.Errorf("17 handles on one table, each watched, read and written at once, hold %d connections, want at most 4 (a pool of 3, one listener)", n)
			} else {
				t.Logf("17 handles on one table: %d connections", n)
			}
			// Quiet: drain the signals of the writes above.
			time.Sleep(quiet)
			for _, w := range watches {
				drain(w)
			}
			if _, err := handles[5].Update(t.Context(), versions[5], backendtest.SampleRecord("b", 3)); err != nil {
				t.Fatal(err)
			}
			select {
			case <-watches[5]:
			case <-time.After(10 * time.Second):
				t.Fatal("no signal on shard 5's Watch within 10s of its write")
			}
			time.Sleep(quiet) // any wrong signal has come by now
			for i, w := range watches {
				select {
				case <-w:
					t.Errorf("the write to shard 5 signalled record %d's Watch too", i)
				default:
				}
			}
		})
	}
}

// drain reads the signal w holds, if any.
func drain(w <-chan struct{}) {
	select {
	case <-w:
	default:
	}
}
