package main

import (
	"context"
	"fmt"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeevents"
)

// store is an opened election store and what comes with it.
type store struct {
	backend backend.Backend
	// observer is told about leadership changes besides the metrics (the
	// Kubernetes Events of the lease backend); nil for none.
	observer election.Observer
	// lease names the election in answers: "<namespace>/<name>" for a
	// Lease, the name for SQLite.
	lease string
	close func()
}

// opener opens one kind of election store.
type opener func(ctx context.Context, s *setup) (*store, error)

// openers maps each concrete --backend value to its store.
var openers = map[string]opener{
	"sqlite": openSQLite,
	"lease":  openLease,
}

// inCluster reports whether the process runs in a Kubernetes Pod, by the
// variables the kubelet sets (client-go's in-cluster check).
func inCluster(environ []string) bool {
	host, _ := lookup(environ, "KUBERNETES_SERVICE_HOST")
	port, _ := lookup(environ, "KUBERNETES_SERVICE_PORT")
	return host != "" && port != ""
}

// resolveBackend turns --backend auto into lease inside a cluster and
// sqlite elsewhere.
func resolveBackend(o *options, environ []string) string {
	switch {
	case o.backend != "auto":
		return o.backend
	case inCluster(environ):
		return "lease"
	default:
		return "sqlite"
	}
}

func openSQLite(ctx context.Context, s *setup) (*store, error) {
	o := s.o
	b, err := sqlite.Open(ctx, sqlite.Options{
		Path:           o.sqlitePath,
		Election:       o.leaseName,
		BusyTimeout:    o.sqliteBusyTimeout,
		AllowNetworkFS: o.sqliteAllowNetFS,
		Logger:         s.log,
	})
	if err != nil {
		return nil, fmt.Errorf("--sqlite-path: %w", err)
	}
	for _, w := range b.Warnings() {
		s.log.Warn(w)
	}
	return &store{backend: b, lease: o.leaseName, close: func() { _ = b.Close() }}, nil
}

func openLease(_ context.Context, s *setup) (*store, error) {
	o := s.o
	client, err := s.kube()
	if err != nil {
		return nil, err
	}
	namespace, err := lease.ResolveNamespace(o.namespace, s.getenv, "")
	if err != nil {
		return nil, fmt.Errorf("--namespace: %w", err)
	}
	b, err := lease.New(lease.Options{Client: client, Namespace: namespace, Name: o.leaseName})
	if err != nil {
		return nil, err
	}
	st := &store{backend: b, lease: namespace + "/" + o.leaseName, close: func() { _ = b.Close() }}
	pod := kubeevents.Pod{Namespace: s.getenv("POD_NAMESPACE"), Name: s.getenv("POD_NAME"), UID: s.getenv("POD_UID")}
	if pod.Name == "" || !o.events {
		s.log.Info("not recording Kubernetes Events", "reason", eventsOffReason(o))
		return st, nil
	}
	if pod.Namespace == "" {
		pod.Namespace = namespace
	}
	rec, err := kubeevents.New(client, pod, namespace, o.leaseName, s.identity)
	if err != nil {
		s.log.Warn("not recording Kubernetes Events", "err", err)
		return st, nil
	}
	st.observer = rec
	st.close = func() { rec.Stop(); _ = b.Close() }
	return st, nil
}

func eventsOffReason(o *options) string {
	if !o.events {
		return "--events=false"
	}
	return "POD_NAME is not set"
}
