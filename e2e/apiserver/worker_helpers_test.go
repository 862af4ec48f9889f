package apiserver

import (
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// workerEvent is one JSON line of the worker's stdout.
type workerEvent struct {
	Event, Writer, Value, Error string
	Token                       int64
	Accepted, Stale             bool
}

// workerProc is one running examples/worker.
type workerProc = sidecartest.Worker[workerEvent]

func startWorker(t *testing.T, args ...string) *workerProc {
	t.Helper()
	return sidecartest.StartWorker[workerEvent](t, sidecartest.Build(t, "examples/worker"), args...)
}
