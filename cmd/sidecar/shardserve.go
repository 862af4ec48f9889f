package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// serveShards builds shard mode from cfg (--shards N) and runs it until
// ctx ends: one handle on the SQLite file per shard record and one for
// this replica's member record, a shardgroup.Group, and the shard API.
// When ctx ends the group leaves gracefully (drains and releases every
// shard) while the API still serves, so the app can see its shards drain
// and acknowledge them; then the servers shut down.
func serveShards(ctx context.Context, cfg sidecarConfig, log *slog.Logger) error {
	el, sc := cfg.election, cfg.shards
	log.Info("shard mode", "group", sc.group, "shards", sc.count)
	var handles []*sqlite.Backend
	defer func() {
		for _, b := range handles {
			_ = b.Close()
		}
	}()
	open := func(name string) (*sqlite.Backend, error) {
		b, err := sqlite.Open(ctx, sqlite.Options{
			Path:           el.sqlite.path,
			Election:       name,
			BusyTimeout:    el.sqlite.busyTimeout,
			AllowNetworkFS: el.sqlite.allowNetworkFS,
			SharedFile:     el.sqlite.sharedFile,
			Logger:         log,
		})
		if err != nil {
			return nil, fmt.Errorf("--sqlite-path: %w", err)
		}
		if len(handles) == 0 {
			for _, w := range b.Warnings() {
				log.Warn(w)
			}
		}
		handles = append(handles, b)
		return b, nil
	}
	member, err := open(shardgroup.MemberRecord(sc.group, el.identity))
	if err != nil {
		return err
	}
	shards := make([]backend.Backend, sc.count)
	for i := range shards {
		b, err := open(shardgroup.ShardRecord(sc.group, i))
		if err != nil {
			return err
		}
		shards[i] = b
	}
	g, err := shardgroup.New(shardgroup.Config{
		Group:          sc.group,
		Identity:       el.identity,
		Shards:         shards,
		Member:         member,
		Members:        member,
		Election:       el.electorConfig(nil, log),
		RebalanceDelay: sc.rebalanceDelay,
		DrainTimeout:   sc.drainTimeout,
		MaxPerMember:   sc.maxPerMember,
	})
	if err != nil {
		return err
	}
	opts := httpapi.Options{AnyHost: cfg.exposeAppAPI()}
	servers, err := listen(log, []listener{
		{"app", cfg.httpAddress, httpapi.NewShardsAppHandler(g, opts)},
		{"ops", cfg.opsAddress, httpapi.NewShardsOpsHandler(g, opts)},
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
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	for _, s := range servers {
		_ = s.srv.Shutdown(shutdownCtx)
	}
	log.Info("stopped")
	return err
}
