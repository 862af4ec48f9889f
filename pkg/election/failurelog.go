package election

import (
	"log/slog"
	"time"
)

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
