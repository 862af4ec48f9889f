package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
	"github.com/leader-sidecar/leader-sidecar/pkg/metrics"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// serveShards builds shard mode from cfg (--shards N) and runs it until
// ctx ends: one handle on the store per shard record and one for this
// replica's member record (an SQLite row or a Lease each, opened as the
// single election's record is; the member's Lease owned by the Pod under
// --shard-member-owner pod and written through a Kubernetes client of its
// own; on Leases, the shards' handles share one watch of the namespace's
// Leases, which also lists the members; on PostgreSQL, every handle is a
// row of one postgres.Table, sharing its pool and its one listening
// connection), a shardgroup.Group, the shard API, the
// metrics of every shard (metrics.WatchShards) on /metrics, and on Leases
// Kubernetes Events of every shard's terms, related to its Lease.
// When ctx ends the group leaves gracefully (drains and releases every
// shard) while the API still serves, so the app can see its shards drain
// and acknowledge them; then the servers shut down.
func serveShards(ctx context.Context, cfg sidecarConfig, log *slog.Logger) error {
	el, sc := cfg.election, cfg.shards
	log.Info("shard mode", "group", sc.group, "shards", sc.count)
	m := metrics.New(metrics.Info{Lease: sc.group, Version: currentVersion(), Backend: el.backend, Identity: el.identity})
	kube := el.kubeClients()
	var stores []*store
	defer func() {
		for _, st := range stores {
			st.close()
		}
	}()
	openRecord := func(name string, ownedByPod bool, kube *kubeclient.Clients) (backend.Backend, error) {
		rc := el
		rc.leaseName = name
		rc.ownedByPod = ownedByPod
		rc.sharedWatch = true // one watch of the namespace for every record
		st, err := openStore(ctx, rc, kube, log)
		if err != nil {
			return nil, err
		}
		stores = append(stores, st)
		return st.backend, nil
	}
	if el.backend == "postgres" {
		table, err := openPostgresTable(ctx, el, log)
		if err != nil {
			return err
		}
		defer func() { _ = table.Close() }()
		openRecord = func(name string, _ bool, _ *kubeclient.Clients) (backend.Backend, error) {
			b := table.Election(name)
			stores = append(stores, &store{backend: b, lease: name, close: func() { _ = b.Close() }})
			return b, nil
		}
	}
	shards := make([]backend.Backend, sc.count)
	for i := range shards {
		var err error
		if shards[i], err = openRecord(shardgroup.ShardRecord(sc.group, i), false, kube); err != nil {
			return err
		}
	}
	// The member records are listed from the shards' store (on Leases,
	// their shared watch of the namespace); this replica's own is written
	// through a client of its own, whose rate no shard's request takes:
	// a replica whose presence cannot be written is seen by nobody, sees
	// itself alone and contends for every shard.
	members, ok := shards[0].(backend.Lister)
	if !ok {
		return fmt.Errorf("--backend %s cannot list the member records of a shard group", el.backend)
	}
	member, err := openRecord(shardgroup.MemberRecord(sc.group, el.identity), sc.memberOwner == memberOwnerPod, el.kubeClients())
	if err != nil {
		return err
	}
	for i := range shards {
		shards[i] = m.InstrumentBackend(shards[i])
	}
	ec := el.electorConfig(nil, log)
	ec.Observer = m
	// Kubernetes Events per shard, each related to the shard's Lease; the
	// recorders stop after the group has left (its releases recorded).
	var stopEvents []func()
	defer func() {
		for _, stop := range stopEvents {
			stop()
		}
	}()
	var shardEvents func(i int) election.Observer
	if pod, ok := eventsPod(cfg, log); ok {
		shardEvents = func(i int) election.Observer {
			obs, stop := newEventRecorder(cfg, pod, kube, stores[0].namespace, shardgroup.ShardRecord(sc.group, i), log)
			stopEvents = append(stopEvents, stop)
			return obs
		}
	}
	g, err := shardgroup.New(shardgroup.Config{
		Group:            sc.group,
		Identity:         el.identity,
		Shards:           shards,
		Member:           member,
		Members:          members,
		Election:         ec,
		ShardObserver:    shardEvents,
		RebalanceDelay:   sc.rebalanceDelay,
		DrainTimeout:     sc.drainTimeout,
		StopDrainTimeout: sc.stopDrainTimeout,
		MaxPerMember:     sc.maxPerMember,
	})
	if err != nil {
		return err
	}
	m.WatchShards(g)
	streamsDone := make(chan struct{}) // ends the open /shards/watch streams
	opts := httpapi.Options{Metrics: m.Handler(), AnyHost: cfg.exposeAppAPI(), Done: streamsDone}
	servers, err := listen(log, []listener{
		{"app", "--http-address", cfg.httpAddress, httpapi.NewShardsAppHandler(g, opts)},
		{"ops", "--ops-address", cfg.opsAddress, httpapi.NewShardsOpsHandler(g, opts)},
	})
	if err != nil {
		return err
	}

	serveErr := make(chan error, len(servers))
	for _, s := range servers {
		go func() { serveErr <- s.serve() }()
	}
	groupCtx, stop := context.WithCancel(ctx)
	defer stop()
	groupDone := make(chan error, 1)
	go func() { groupDone <- g.Run(groupCtx) }()
	select {
	case <-ctx.Done():
		log.Info("shutting down: leaving the shard group")
		err = <-groupDone
	case err = <-serveErr:
		log.Error("HTTP server failed; leaving the shard group", "err", err)
		stop()
		err = errors.Join(err, <-groupDone)
	case err = <-groupDone:
		log.Error("the shard group stopped; exiting", "err", err)
	}
	close(streamsDone)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	for _, s := range servers {
		_ = s.srv.Shutdown(shutdownCtx)
	}
	log.Info("stopped")
	return err
}
