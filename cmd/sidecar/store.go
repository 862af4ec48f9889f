package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
)

// store is an opened election store.
type store struct {
	backend backend.Backend
	// lease names the election in answers: "<namespace>/<name>" for a
	// Lease, the name for SQLite.
	lease string
	// namespace is the Lease's namespace; "" for SQLite.
	namespace string
	close     func()
}

// opener opens one kind of election store.
type opener func(ctx context.Context, cfg electionConfig, kube *kubeClient, log *slog.Logger) (*store, error)

// openers maps each resolved backend kind to its store.
var openers = map[string]opener{
	"sqlite": openSQLite,
	"lease":  openLease,
}

// openStore opens the store cfg names. kube is the process's one
// Kubernetes client, built only if the store needs it.
func openStore(ctx context.Context, cfg electionConfig, kube *kubeClient, log *slog.Logger) (*store, error) {
	return openers[cfg.backend](ctx, cfg, kube, log)
}

func openSQLite(ctx context.Context, cfg electionConfig, _ *kubeClient, log *slog.Logger) (*store, error) {
	b, err := sqlite.Open(ctx, sqlite.Options{
		Path:           cfg.sqlite.path,
		Election:       cfg.leaseName,
		BusyTimeout:    cfg.sqlite.busyTimeout,
		AllowNetworkFS: cfg.sqlite.allowNetworkFS,
		SharedFile:     cfg.sqlite.sharedFile,
		Logger:         log,
	})
	if err != nil {
		return nil, fmt.Errorf("--sqlite-path: %w", err)
	}
	for _, w := range b.Warnings() {
		log.Warn(w)
	}
	return &store{backend: b, lease: cfg.leaseName, close: func() { _ = b.Close() }}, nil
}

func openLease(_ context.Context, cfg electionConfig, kube *kubeClient, log *slog.Logger) (*store, error) {
	client, err := kube.forElection()
	if err != nil {
		return nil, err
	}
	getenv := func(k string) string {
		if k == lease.NamespaceEnv {
			return cfg.pod.namespace
		}
		return ""
	}
	namespace, err := lease.ResolveNamespace(cfg.kube.namespace, getenv, "")
	if err != nil {
		return nil, fmt.Errorf("--namespace: %w", err)
	}
	b, err := lease.New(lease.Options{Client: client, Namespace: namespace, Name: cfg.leaseName, Logger: log})
	if err != nil {
		return nil, err
	}
	log.Info("lease backend", "lease", namespace+"/"+cfg.leaseName, "kubeconfig", cfg.kube.source.String())
	return &store{backend: b, lease: namespace + "/" + cfg.leaseName, namespace: namespace, close: func() { _ = b.Close() }}, nil
}
