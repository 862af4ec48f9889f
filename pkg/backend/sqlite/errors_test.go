package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// wantErrContains fails t unless err is non-nil and its message contains
// every one of parts.
func wantErrContains(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func TestOpenRejects(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "hello.db")
	if err := os.WriteFile(notDB, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	missingDir := filepath.Join(dir, "missing")
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{"directory missing", Options{Path: filepath.Join(missingDir, "leader.db"), Election: "e"},
			[]string{filepath.Join(missingDir, "leader.db"), "directory " + missingDir + " does not exist"}},
		{"path is a directory", Options{Path: dir, Election: "e"}, []string{dir, "is a directory"}},
		{"short file not a database", Options{Path: notDB, Election: "e"}, []string{notDB + " is not an SQLite database"}},
		{"long file not a database", Options{Path: garbage, Election: "e"}, []string{garbage + " is not an SQLite database"}},
		{"no path", Options{Election: "e"}, []string{"Options.Path is empty"}},
		{"no election", Options{Path: filepath.Join(dir, "x.db")}, []string{"Options.Election is empty"}},
		{"negative busy timeout", Options{Path: filepath.Join(dir, "x.db"), Election: "e", BusyTimeout: -1}, []string{"BusyTimeout is negative"}},
		{"negative poll interval", Options{Path: filepath.Join(dir, "x.db"), Election: "e", PollInterval: -1}, []string{"PollInterval is negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Open(ctxT(t), tt.opts)
			if err == nil {
				_ = b.Close()
			}
			wantErrContains(t, err, tt.want...)
		})
	}
	if data, err := os.ReadFile(notDB); err != nil || string(data) != "hello" {
		t.Fatalf("the file that is not a database now holds %q (%v), want it untouched", data, err)
	}
}

func TestNetworkFilesystem(t *testing.T) {
	tests := []struct {
		name    string
		magic   uint32
		allow   bool
		wantErr []string // nil: Open succeeds
		warning string   // "": no warning
	}{
		{"local disk", 0xEF53, false, nil, ""},
		{"nfs refused", 0x6969, false, []string{"is on a network filesystem (nfs)", "--sqlite-allow-network-fs"}, ""},
		{"cifs refused", 0xFF534D42, false, []string{"network filesystem (cifs)"}, ""},
		{"fuse refused", 0x65735546, false, []string{"network filesystem (fuse)"}, ""},
		{"nfs allowed", 0x6969, true, nil, "network filesystem (nfs)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "leader.db")
			var asked string
			opts := Options{Path: path, Election: "e", AllowNetworkFS: tt.allow,
				statfs: func(d string) (uint32, error) { asked = d; return tt.magic, nil }}
			b, err := Open(ctxT(t), opts)
			if asked != dir {
				t.Errorf("statfs asked about %q, want the database's directory %q", asked, dir)
			}
			if tt.wantErr != nil {
				wantErrContains(t, err, append(tt.wantErr, path)...)
				if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("refused Open created the file (stat: %v)", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer func() { _ = b.Close() }()
			w := b.Warnings()
			switch {
			case tt.warning == "" && len(w) != 0:
				t.Fatalf("Warnings() = %q, want none", w)
			case tt.warning != "" && (len(w) != 1 || !strings.Contains(w[0], tt.warning) || !strings.Contains(w[0], path)):
				t.Fatalf("Warnings() = %q, want one naming %s and %q", w, path, tt.warning)
			}
		})
	}
	t.Run("statfs fails", func(t *testing.T) {
		opts := Options{Path: filepath.Join(t.TempDir(), "leader.db"), Election: "e",
			statfs: func(string) (uint32, error) { return 0, os.ErrPermission }}
		_, err := Open(ctxT(t), opts)
		wantErrContains(t, err, opts.Path, "inspect the filesystem")
	})
}

// rawConn is a connection of the test's own on path, as another process
// would have.
func rawConn(t *testing.T, path string) *sql.Conn {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, time.Second, writerPool))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// holdWriteLock takes SQLite's write lock on path from another connection
// and returns the function that releases it.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	conn := rawConn(t, path)
	if _, err := conn.ExecContext(ctxT(t), "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("BEGIN IMMEDIATE: %v", err)
	}
	return func() {
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Errorf("ROLLBACK: %v", err)
		}
	}
}

func TestLockedPastBusyTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	path := filepath.Join(t.TempDir(), "leader.db")
	b, err := Open(ctxT(t), Options{Path: path, Election: "e", BusyTimeout: timeout})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() { _ = b.Close() }()
	v, err := b.Create(ctxT(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	release := holdWriteLock(t, path)
	defer release()
	if _, _, err := b.Get(ctxT(t)); err != nil {
		t.Fatalf("Get while another connection holds the write lock: %v", err)
	}
	want := []string{"database " + path + " is locked", "longer than the busy timeout (100ms)"}

	start := time.Now()
	_, err = b.Update(ctxT(t), v, backendtest.SampleRecord("b", 2))
	elapsed := time.Since(start)
	wantErrContains(t, err, want...)
	var se *modernc.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY {
		t.Fatalf("error %v does not wrap SQLITE_BUSY", err)
	}
	if errors.Is(err, backend.ErrConflict) {
		t.Fatalf("a lock timeout must not look like a conflict: %v", err)
	}
	if elapsed < timeout*9/10 || elapsed > 30*timeout {
		t.Fatalf("Update failed after %v, want about the busy timeout %v", elapsed, timeout)
	}

	_, err = Open(ctxT(t), Options{Path: path, Election: "e", BusyTimeout: timeout})
	wantErrContains(t, err, append(want, "open")...)
}

// TestContentionWaits shows a writer waiting for the lock instead of
// failing: it is still waiting well after a failure would have come back,
// and succeeds once the lock is released.
func TestContentionWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	b, err := Open(ctxT(t), Options{Path: path, Election: "e", BusyTimeout: time.Minute})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() { _ = b.Close() }()
	v, err := b.Create(ctxT(t), backendtest.SampleRecord("a", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	release := holdWriteLock(t, path)

	done := make(chan error, 1)
	go func() {
		_, err := b.Update(ctxT(t), v, backendtest.SampleRecord("b", 2))
		done <- err
	}()
	select {
	case err := <-done:
		release()
		t.Fatalf("Update returned while the lock was held, want it to wait: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Update after the lock was released: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Update still waiting 30s after the lock was released")
	}
	if got, _, err := b.Get(ctxT(t)); err != nil || got.HolderIdentity != "b" {
		t.Fatalf("Get = %+v, %v; want the waiting writer's record", got, err)
	}
}

// TestWritesOfOneProcessTakeTurns: a write to one election waits while
// another write of the process to the same file runs, whatever its
// election; past the busy timeout it fails naming the process's own writes
// (SQLite's lock, which only another process can then hold, is not what
// it waited for); once the other write ends in time, it succeeds.
func TestWritesOfOneProcessTakeTurns(t *testing.T) {
	const timeout = 100 * time.Millisecond
	path := filepath.Join(t.TempDir(), "leader.db")
	open := func(election string, timeout time.Duration) *Backend {
		b, err := Open(ctxT(t), Options{Path: path, Election: election, BusyTimeout: timeout})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	first, second := open("shard-0", timeout), open("shard-1", timeout)
	patient := open("shard-1", time.Minute)

	entered, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	beforeCommit = func(*sql.Tx) {
		once.Do(func() {
			close(entered)
			<-resume
		})
	}
	t.Cleanup(func() { beforeCommit = nil })
	firstDone := make(chan error, 1)
	go func() {
		_, err := first.Create(context.Background(), backendtest.SampleRecord("a", 1))
		firstDone <- err
	}()
	<-entered // the first write holds its turn, inside its transaction

	_, err := second.Create(ctxT(t), backendtest.SampleRecord("b", 1))
	wantErrContains(t, err, "database "+path+" is locked", "this process's other writes", "busy timeout (100ms)")
	var se *modernc.Error
	if errors.As(err, &se) {
		t.Fatalf("the second write reached SQLite's lock (%v); it should have waited for its turn", err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := patient.Create(ctxT(t), backendtest.SampleRecord("b", 1))
		done <- err
	}()
	close(resume)
	if err := <-firstDone; err != nil {
		t.Fatalf("first write: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the second write, once the first ended: %v", err)
	}
}
