// Command worker is an example application to run next to leader-sidecar. It
// does a job only while its replica leads, and writes each job's result
// through a fence.SQLGuard with the term's token, so a replica that was
// paused in the middle of a job and wakes up after another replica has taken
// over cannot overwrite the newer leader's result.
//
//	worker --sidecar http://127.0.0.1:4040 --db results.db --resource billing --name a
//
// --db is an SQLite file (modernc.org/sqlite; a busy timeout and immediate
// transactions are added unless the DSN has a query) or a postgres:// URL
// (pgx). The worker creates the guard's table fence_tokens and its own table
// results (resource, value, writer, token), one row per resource.
//
// # The loop
//
// Wait for leadership (fence.Client.WaitForLeadership). While the term
// lives, run one job every --interval: take the term's ID (its token and
// the sidecar's identity), work for --work-delay, then in one transaction
// check it (guard.Check) and upsert the row. A job that has started runs
// to its end on its own context, not the term's: a process can be paused
// after any check and wake after its term is over, and the token check is
// what refuses that late write. --unguarded skips the check, only to show
// the update it then loses. If the sidecar's tokens go back (its store was
// replaced or reset), the worker logs token-regressed and waits for a
// token above the highest it has led with.
//
// # Output
//
// One JSON object per line on stdout, with "time" and the event's name
// under "event":
//
//	{"event":"waiting"}
//	{"event":"leading","token":5,"holder":"a_0b1e"}
//	{"event":"about-to-write","token":5,"writer":"a","value":"a-1"}
//	{"event":"write","token":5,"writer":"a","value":"a-1","accepted":true}
//	{"event":"write","token":4,"writer":"b","value":"b-7","accepted":false,"stale":true,"error":"..."}
//	{"event":"term-over","token":5,"reason":"fence: leadership lost: ..."}
//	{"event":"token-regressed","error":"fence: token regressed: the sidecar leads with token 2 of ..."}
//
// # Catching it in the middle of a write
//
// With --hold-file, every job waits after logging about-to-write (it has
// read its token) and before opening its transaction until that file
// exists (a hook for tests and demonstrations). A test holds replica A
// there, freezes A and its sidecar with SIGSTOP past the lease, lets B take
// over and write, then creates the file and resumes A: A's write is certain
// to come after B's, with no race against a timer.
//
// # Shards
//
// With --shards, the worker runs next to a sidecar in shard mode
// (--shards N): for each shard its replica holds, a goroutine runs one job
// every --interval and writes it through the per-shard guard
// (guard.CheckShard with the shard's term, resource "<group>/<N>/shard-<i>"),
// into the shard's row of results and a row of shard_writes (resource,
// token, holder, writer, value), the log of every accepted write, in
// commit order by rowid on SQLite. A draining shard's jobs stop, then the
// worker acknowledges the drain (POST /shards/{i}/drained). Its events
// name the shard:
//
//	{"event":"shard-leading","shard":3,"token":5,"holder":"a_0b1e"}
//	{"event":"write","shard":3,"token":5,"holder":"a_0b1e","writer":"a","value":"a-3-1","accepted":true}
//	{"event":"shard-term-over","shard":3,"token":5,"reason":"fence: shard draining: shard 3, token 5"}
//	{"event":"drained","shard":3,"token":5}
//
// SIGTERM or SIGINT: the job in progress finishes (a held job is abandoned
// before it writes), then the worker exits 0.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	_ "modernc.org/sqlite" // registers "sqlite"
)

type worker struct {
	db                       *sql.DB
	guard                    *fence.SQLGuard // nil with --unguarded
	resource, name, holdFile string
	interval, workDelay      time.Duration
	jobs                     int
	log                      *slog.Logger
}

func main() {
	host, _ := os.Hostname()
	sidecar := flag.String("sidecar", fence.DefaultBaseURL, "base URL of the sidecar's app API")
	dsn := flag.String("db", "results.db", "results database: an SQLite file or DSN, or a postgres:// URL")
	unguarded := flag.Bool("unguarded", false, "skip the token check (only to demonstrate the lost update)")
	shards := flag.Bool("shards", false, "work on the shards the sidecar holds (its --shards N), each fenced by its own term")
	w := &worker{log: slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			switch {
			case len(groups) > 0:
			case a.Key == slog.MessageKey:
				a.Key = "event"
			case a.Key == slog.LevelKey:
				return slog.Attr{} // the event says it all
			}
			return a
		},
	}))}
	flag.StringVar(&w.resource, "resource", "billing", "the resource the jobs write, fenced by its own token")
	flag.StringVar(&w.name, "name", host, "this worker's name, written with each result")
	flag.DurationVar(&w.interval, "interval", 200*time.Millisecond, "pause between jobs")
	flag.DurationVar(&w.workDelay, "work-delay", 0, "simulated work between taking the token and writing")
	flag.StringVar(&w.holdFile, "hold-file", "", "before each write, wait until this file exists (test hook)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := w.run(ctx, *sidecar, *dsn, *unguarded, *shards); err != nil {
		w.log.Error("failed", "error", err.Error())
		os.Exit(1)
	}
	w.log.Info("stopped")
}

func (w *worker) run(ctx context.Context, sidecar, dsn string, unguarded, shards bool) error {
	client, err := fence.NewClient(sidecar)
	if err != nil {
		return err
	}
	driver := "sqlite"
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		driver = "pgx"
	} else if !strings.Contains(dsn, "?") {
		dsn += "?_pragma=busy_timeout(5000)&_txlock=immediate"
	}
	if w.db, err = sql.Open(driver, dsn); err != nil {
		return err
	}
	defer w.db.Close()
	w.guard, _ = fence.NewSQLGuard("") // table fence_tokens; only a bad name fails
	if err := w.guard.EnsureTable(ctx, w.db); err != nil {
		return err
	}
	if _, err := w.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS results (resource TEXT PRIMARY KEY,
		value TEXT NOT NULL, writer TEXT NOT NULL, token BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("creating table results: %w", err)
	}
	if unguarded {
		w.guard = nil
	}
	if shards {
		if _, err := w.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS shard_writes (resource TEXT NOT NULL,
			token BIGINT NOT NULL, holder TEXT NOT NULL, writer TEXT NOT NULL, value TEXT NOT NULL)`); err != nil {
			return fmt.Errorf("creating table shard_writes: %w", err)
		}
		return w.runShards(ctx, client)
	}
	for {
		w.log.Info("waiting")
		term, err := client.WaitForLeadership(ctx)
		if errors.Is(err, fence.ErrTokenRegressed) {
			// The store was replaced or reset: its tokens went back. Say
			// so once; the next wait lasts until a token above ours.
			w.log.Info("token-regressed", "error", err.Error())
			continue
		}
		if err != nil {
			return nil // only once ctx is done: we were told to stop
		}
		w.log.Info("leading", "token", term.Token(), "holder", term.ID().Holder)
		for term.Err() == nil && ctx.Err() == nil {
			w.job(ctx, term.ID())
			select {
			case <-time.After(w.interval):
			case <-term.Done():
			case <-ctx.Done():
			}
		}
		w.log.Info("term-over", "token", term.Token(), "reason", termOverReason(ctx, term.Err()))
		term.Close()
	}
}

// termOverReason says why the loop over a term's jobs ended: the term's
// own end, or the worker being stopped. A stop can be seen on ctx an
// instant before the term derived from it is cancelled, so the term's
// error may still be nil then.
func termOverReason(ctx context.Context, termErr error) string {
	if termErr != nil {
		return termErr.Error()
	}
	return "stopping: " + context.Cause(ctx).Error()
}

// job computes a value and writes it in term. ctx only abandons a held job.
func (w *worker) job(ctx context.Context, term fence.TermID) {
	token := term.Token
	w.jobs++
	value := fmt.Sprintf("%s-%d", w.name, w.jobs)
	w.log.Info("about-to-write", "token", token, "writer", w.name, "value", value)
	time.Sleep(w.workDelay) // the work; a pause here is what fencing is for
	for w.holdFile != "" {
		if _, err := os.Stat(w.holdFile); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			w.log.Info("abandoned", "token", token, "writer", w.name, "value", value)
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	jctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := w.write(jctx, term, value)
	attrs := []any{"token", token, "writer", w.name, "value", value, "accepted", err == nil}
	if err != nil {
		attrs = append(attrs, "stale", errors.Is(err, fence.ErrStaleToken), "error", err.Error())
	}
	w.log.Info("write", attrs...)
}

// write checks term and stores value in one transaction.
func (w *worker) write(ctx context.Context, term fence.TermID, value string) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if w.guard != nil {
		if err := w.guard.Check(ctx, tx, w.resource, term); err != nil {
			return err // fence.ErrStaleToken: another term has written
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO results (resource, value, writer, token)
		VALUES ($1, $2, $3, $4) ON CONFLICT (resource) DO UPDATE
		SET value = excluded.value, writer = excluded.writer, token = excluded.token`,
		w.resource, value, w.name, term.Token); err != nil {
		return err
	}
	return tx.Commit()
}
