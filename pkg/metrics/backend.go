package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// InstrumentBackend returns b with every Get, Create and Update timed into
// store_request_duration_seconds. The result implements the optional
// interfaces b implements, backend.Snapshotter and backend.LossNotifier,
// and no others (a snapshot is no request, so it is not timed).
func (m *Metrics) InstrumentBackend(b backend.Backend) backend.Backend {
	i := &instrumented{Backend: b, m: m}
	return backend.Wrapped(b, i)
}

type instrumented struct {
	backend.Backend
	m *Metrics
}

func (i *instrumented) observe(op string, start time.Time, err error) {
	i.m.storeLatency.WithLabelValues(op, result(err)).Observe(time.Since(start).Seconds())
}

// result names an outcome without unbounded label values.
func result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, backend.ErrNotFound):
		return "not_found"
	case errors.Is(err, backend.ErrAlreadyExists):
		return "already_exists"
	case errors.Is(err, backend.ErrConflict):
		return "conflict"
	case errors.Is(err, backend.ErrStoreLost):
		return "store_lost"
	default:
		return "error"
	}
}

func (i *instrumented) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	start := time.Now()
	rec, v, err := i.Backend.Get(ctx)
	i.observe("get", start, err)
	return rec, v, err
}

func (i *instrumented) Create(ctx context.Context, rec backend.Record) (backend.Version, error) {
	start := time.Now()
	v, err := i.Backend.Create(ctx, rec)
	i.observe("create", start, err)
	return v, err
}

func (i *instrumented) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	start := time.Now()
	v, err := i.Backend.Update(ctx, prev, rec)
	i.observe("update", start, err)
	return v, err
}

// CreateFirst is exposed by backend.Wrapped only when the inner backend
// has it; it is timed as a create.
func (i *instrumented) CreateFirst(ctx context.Context, rec backend.Record) (backend.Version, error) {
	start := time.Now()
	v, err := i.Backend.(backend.FirstCreator).CreateFirst(ctx, rec)
	i.observe("create", start, err)
	return v, err
}
