package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/pgtest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/postgres"
)

// startPair starts a primary and a streaming standby for one test.
func startPair(t *testing.T, mode pgtest.Replication) *pgtest.Pair {
	t.Helper()
	p, err := pgtest.StartPair(mode)
	if err != nil {
		t.Fatalf("PostgreSQL for the test: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping PostgreSQL: %v", err)
		}
	})
	return p
}

// openOn opens a handle on an election of the default table at url.
func openOn(t *testing.T, url, election string, log *slog.Logger) *postgres.Backend {
	t.Helper()
	b, err := postgres.Open(t.Context(), postgres.Options{URL: url, Election: election, Logger: log})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestWritesWaitForTheSynchronousStandby: on a primary that names a
// synchronous standby, the backend's writes wait for it, even where the
// server's default is synchronous_commit = off (as on the test servers):
// with the standby cut off, neither an Update nor a Create is acknowledged.
// After the primary crashes and the standby is promoted, every
// acknowledged write is there, and the handle, whose URL names both
// servers, reaches the promoted one.
func TestWritesWaitForTheSynchronousStandby(t *testing.T) {
	p := startPair(t, pgtest.Synchronous)
	b := openOn(t, p.DSN(), "e", nil)
	v, err := b.Create(t.Context(), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create with the standby streaming: %v", err)
	}
	if v, err = b.Update(t.Context(), v, backendtest.SampleRecord("b", 2)); err != nil {
		t.Fatalf("Update with the standby streaming: %v", err)
	}
	other := openOn(t, p.DSN(), "other", nil)
	if err := p.CutStandby(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, write := range []struct {
		name string
		do   func(ctx context.Context) error
	}{
		{"Update", func(ctx context.Context) error {
			_, err := b.Update(ctx, v, backendtest.SampleRecord("c", 3))
			return err
		}},
		{"Create", func(ctx context.Context) error {
			_, err := other.Create(ctx, backendtest.SampleRecord("d", 1))
			return err
		}},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err := write.do(ctx)
		cancel()
		if err == nil {
			t.Fatalf("%s acknowledged while the synchronous standby was cut off: a failover now loses it", write.name)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s with the standby cut off: %v, want no answer within 1s", write.name, err)
		}
	}
	if err := p.CrashPrimary(); err != nil {
		t.Fatal(err)
	}
	if err := p.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	rec, _, err := b.Get(t.Context())
	if err != nil {
		t.Fatalf("Get after the promotion: %v", err)
	}
	backendtest.AssertRecordEqual(t, rec, backendtest.SampleRecord("b", 2))
}

// TestOpenWarnsOfAsynchronousStandbys: Open on a primary that streams to
// standbys none of which is synchronous says so in the log, with the risk
// and the setting to change; on a primary with a synchronous standby, and
// on a server without standbys, it says nothing of it.
func TestOpenWarnsOfAsynchronousStandbys(t *testing.T) {
	opened := func(url string) string {
		var logs syncBuffer
		openOn(t, url, "e", slog.New(slog.NewTextHandler(&logs, nil)))
		return logs.String()
	}
	async := opened(startPair(t, pgtest.Asynchronous).DSN())
	for _, want := range []string{"level=WARN", "asynchronous", "synchronous_standby_names", "token"} {
		if !strings.Contains(async, want) {
			t.Errorf("Open on a primary with an asynchronous standby logged:\n%s\nwant a warning with %q", async, want)
		}
	}
	t.Logf("%s", async)
	if sync := opened(startPair(t, pgtest.Synchronous).DSN()); strings.Contains(sync, "synchronous_standby_names") {
		t.Errorf("Open on a primary with a synchronous standby logged:\n%s\nwant no warning", sync)
	}
	if alone := opened(server.Server(t).DSN); strings.Contains(alone, "synchronous_standby_names") {
		t.Errorf("Open on a server without standbys logged:\n%s\nwant no warning", alone)
	}
}
