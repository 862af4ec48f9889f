package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
)

// opener opens one kind of election store.
type opener func(ctx context.Context, o *options, log *slog.Logger) (backend.Backend, error)

// openers maps each concrete --backend value to its store.
var openers = map[string]opener{
	"sqlite": openSQLite,
}

// inCluster reports whether the process runs in a Kubernetes Pod, by the
// variables the kubelet sets (client-go's in-cluster check).
func inCluster(environ []string) bool {
	host, _ := lookup(environ, "KUBERNETES_SERVICE_HOST")
	port, _ := lookup(environ, "KUBERNETES_SERVICE_PORT")
	return host != "" && port != ""
}

// resolveBackend turns --backend auto into a concrete kind.
func resolveBackend(o *options, environ []string) (string, error) {
	if o.backend != "auto" {
		return o.backend, nil
	}
	if inCluster(environ) {
		// A per-Pod SQLite file would give every replica its own election:
		// every one of them would lead. Refuse rather than split the brain.
		return "", errors.New("--backend auto: running in a Kubernetes cluster, where auto means the lease backend, " +
			"which this build does not include; use --backend sqlite with a --sqlite-path that every replica shares")
	}
	return "sqlite", nil
}

func openSQLite(ctx context.Context, o *options, log *slog.Logger) (backend.Backend, error) {
	b, err := sqlite.Open(ctx, sqlite.Options{
		Path:           o.sqlitePath,
		Election:       o.leaseName,
		BusyTimeout:    o.sqliteBusyTimeout,
		AllowNetworkFS: o.sqliteAllowNetFS,
	})
	if err != nil {
		return nil, fmt.Errorf("--sqlite-path: %w", err)
	}
	for _, w := range b.Warnings() {
		log.Warn(w)
	}
	return b, nil
}
