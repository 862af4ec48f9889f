package election

import (
	"context"
	"log/slog"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// withRequestLog returns b with every store request logged at debug level
// (operation, duration, version written, error), when log has debug
// enabled; otherwise b itself. The optional interfaces of b are kept.
func withRequestLog(b backend.Backend, log *slog.Logger) backend.Backend {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return b
	}
	l := &requestLog{Backend: b, log: log}
	return backend.Wrapped(b, l)
}

type requestLog struct {
	backend.Backend
	log *slog.Logger
}

func (r *requestLog) done(op string, start time.Time, rec *backend.Record, v backend.Version, err error) {
	attrs := []any{"op", op, "took", time.Since(start)}
	if rec != nil && err == nil {
		attrs = append(attrs, "holder", rec.HolderIdentity, "token", rec.Transitions, "version", v)
	}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	r.log.Debug("store request", attrs...)
}

func (r *requestLog) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	start := time.Now()
	rec, v, err := r.Backend.Get(ctx)
	r.done("get", start, &rec, v, err)
	return rec, v, err
}

func (r *requestLog) Create(ctx context.Context, rec backend.Record) (backend.Version, error) {
	start := time.Now()
	v, err := r.Backend.Create(ctx, rec)
	r.done("create", start, &rec, v, err)
	return v, err
}

func (r *requestLog) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	start := time.Now()
	v, err := r.Backend.Update(ctx, prev, rec)
	r.done("update", start, &rec, v, err)
	return v, err
}

// CreateFirst is exposed by backend.Wrapped only when the inner backend
// has it.
func (r *requestLog) CreateFirst(ctx context.Context, rec backend.Record) (backend.Version, error) {
	start := time.Now()
	v, err := r.Backend.(backend.FirstCreator).CreateFirst(ctx, rec)
	r.done("create-first", start, &rec, v, err)
	return v, err
}

// failureWarnEvery is the least time between two warnings about store
// requests failing in a row.
const failureWarnEvery = 30 * time.Second

// failureLog turns a run of failed store requests into a few log lines:
// a warning for the first, then at most one per failureWarnEvery with the
// count, and one line when a request succeeds again.
type failureLog struct {
	streak   int
	warnedAt time.Time
}

// failed records a failure at now and logs it if it is due.
func (f *failureLog) failed(log *slog.Logger, now time.Time, op string, err error) {
	f.streak++
	if f.streak > 1 && now.Sub(f.warnedAt) < failureWarnEvery {
		return
	}
	f.warnedAt = now
	log.Warn("store request failed", "op", op, "err", err, "failuresInARow", f.streak)
}

// succeeded ends a run of failures.
func (f *failureLog) succeeded(log *slog.Logger) {
	if f.streak > 0 {
		log.Info("store reachable again", "failuresInARow", f.streak)
	}
	f.streak = 0
}
