package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	_ "modernc.org/sqlite" // the driver the backend uses

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
)

// The floor of the SQLite hand-off is its critical path with nothing else:
// one process commits the release (a compare-and-swap of one row, on a
// connection opened with the backend's own settings for a release:
// sqlite.WriterDSN), a second process (this one) learns of the commit the
// way a standby does (the directory watch reports a write to the -wal,
// then PRAGMA data_version is read every millisecond until it changes),
// reads the row, and commits the acquire (the backend's settings for a
// write that names a holder: synchronous=FULL).
const (
	// floorReleaserEnv names the database file when this program runs as
	// the floor's releasing process (see releaseOnRequest).
	floorReleaserEnv = "LEADER_SIDECAR_BENCH_FLOOR_RELEASER"

	floorSchema = `CREATE TABLE records (name TEXT PRIMARY KEY, version INTEGER NOT NULL, holder TEXT NOT NULL);
INSERT INTO records VALUES ('e', 1, 'a')`
	floorRelease = `UPDATE records SET version = version + 1, holder = '' WHERE name = 'e' AND version = ?`
	floorAcquire = `UPDATE records SET version = version + 1, holder = 'b' WHERE name = 'e' AND version = ?`
	floorRead    = `SELECT version, holder FROM records WHERE name = 'e'`

	// As a standby's watch (pkg/backend/sqlite): after a notification,
	// data_version every millisecond; without one, every poll interval.
	floorFollowUp = time.Millisecond
	floorPoll     = sqlite.DefaultPollInterval
)

// releaserMain runs this program as the floor's releasing process when
// the environment says so; it never returns then.
func releaserMain() {
	if path := os.Getenv(floorReleaserEnv); path != "" {
		if err := releaseOnRequest(path, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "releaser:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// releaseOnRequest commits a release for each version read from in, one a
// line, and writes "released <Unix ns>" after each commit.
func releaseOnRequest(path string, in io.Reader, out io.Writer) error {
	db, err := sql.Open("sqlite", sqlite.WriterDSN(path, true))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		return err
	}
	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		v, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			return err
		}
		if err := casRow(db, floorRelease, v); err != nil {
			return err
		}
		fmt.Fprintf(out, "released %d\n", time.Now().UnixNano())
	}
	return sc.Err()
}

// casRow runs stmt (a compare-and-swap from version v) and checks it wrote.
func casRow(db *sql.DB, stmt string, v int64) error {
	res, err := db.Exec(stmt, v)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("compare-and-swap from version %d wrote %d rows (%v)", v, n, err)
	}
	return nil
}

// sqliteFloor measures n hand-offs of the floor: from the request to the
// releasing process to this process's committed acquire.
func (b *bench) sqliteFloor(n int) ([]trial, error) {
	dir := filepath.Join(b.tmp, fmt.Sprintf("floor-%d", b.seq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "floor.db")
	db, err := sql.Open("sqlite", sqlite.WriterDSN(path, false))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(2)
	if _, err := db.Exec(floorSchema); err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return nil, err
	}
	watchConn, err := db.Conn(context.Background()) // data_version is per connection
	if err != nil {
		return nil, err
	}
	defer watchConn.Close()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), floorReleaserEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		return nil, fmt.Errorf("releasing process did not start: %q", lines.Text())
	}
	s := &sqliteStandby{w: w, conn: watchConn, wal: path + "-wal"}
	version := int64(1)
	var out []trial
	for i := 0; i < n; i++ {
		pause := floorPause()
		last, err := s.dataVersion()
		if err != nil {
			return out, err
		}
		<-pause
		s.drain()
		t0 := time.Now()
		if _, err := fmt.Fprintf(stdin, "%d\n", version); err != nil {
			return out, err
		}
		notified, err := s.awaitChange(last)
		if err != nil {
			return out, err
		}
		var holder string
		if err := watchConn.QueryRowContext(context.Background(), floorRead).Scan(&version, &holder); err != nil {
			return out, err
		}
		seen := time.Now()
		if holder != "" {
			return out, fmt.Errorf("after the change the row names %q, want the release", holder)
		}
		if err := casRow(db, floorAcquire, version); err != nil {
			return out, err
		}
		done := time.Now()
		version++
		if !lines.Scan() {
			return out, fmt.Errorf("releasing process ended: %v", lines.Err())
		}
		ns, err := strconv.ParseInt(strings.TrimPrefix(lines.Text(), "released "), 10, 64)
		if err != nil {
			return out, fmt.Errorf("releasing process: %q", lines.Text())
		}
		t := trial{Latency: done.Sub(t0), Steps: []step{
			{"release committed", time.Unix(0, ns).Sub(t0)}, {"-wal write reported", notified.Sub(t0)},
			{"release read", seen.Sub(t0)}, {"acquire committed", done.Sub(t0)},
		}}
		out = append(out, t)
		b.logf("  floor sqlite trial %d: %v %s", i+1, t.Latency.Round(time.Microsecond), stepsString(t.Steps))
	}
	return out, nil
}

// sqliteStandby is the floor's standby: the watch on the directory and the
// connection it reads data_version on.
type sqliteStandby struct {
	w    *fsnotify.Watcher
	conn *sql.Conn
	wal  string
}

func (s *sqliteStandby) dataVersion() (int64, error) {
	var v int64
	err := s.conn.QueryRowContext(context.Background(), "PRAGMA data_version").Scan(&v)
	return v, err
}

// drain drops the events of earlier trials.
func (s *sqliteStandby) drain() {
	for {
		select {
		case <-s.w.Events:
		default:
			return
		}
	}
}

// awaitChange waits until data_version differs from last, as a standby's
// watch does, and returns when the first write to the -wal was reported
// (the zero time if the change was found by the poll alone).
func (s *sqliteStandby) awaitChange(last int64) (notified time.Time, err error) {
	timer := time.NewTimer(floorPoll)
	defer timer.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case ev := <-s.w.Events:
			if ev.Name != s.wal || !ev.Has(fsnotify.Write) || !notified.IsZero() {
				continue
			}
			notified = time.Now()
		case err := <-s.w.Errors:
			return notified, err
		case <-timer.C:
		}
		v, err := s.dataVersion()
		if err != nil {
			return notified, err
		}
		if v != last {
			return notified, nil
		}
		if notified.IsZero() {
			timer.Reset(floorPoll)
		} else {
			timer.Reset(floorFollowUp)
		}
	}
	return notified, errors.New("no change of data_version within 10s")
}
