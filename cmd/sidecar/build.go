package main

import (
	"context"
	"log/slog"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
	"github.com/leader-sidecar/leader-sidecar/pkg/metrics"
	"github.com/leader-sidecar/leader-sidecar/pkg/podreadiness"
)

// sidecarParts is everything the sidecar runs, built from its config.
type sidecarParts struct {
	cfg       sidecarConfig
	log       *slog.Logger
	elector   *election.Elector
	publisher *podreadiness.Publisher // nil unless pod-condition or label
	appGate   *appGate                // nil without --app-health-url
	servers   []server
	// streamsDone is closed to end the open /leader/watch streams.
	streamsDone chan struct{}
	close       func()
}

// buildSidecar opens the store and the listeners and builds the elector.
// The listeners are bound before the sidecar joins the election, so a
// port conflict stops it early. On error nothing is left open.
func buildSidecar(ctx context.Context, cfg sidecarConfig, log *slog.Logger) (_ *sidecarParts, err error) {
	el := cfg.election
	m := metrics.New(metrics.Info{Lease: el.leaseName, Version: currentVersion(), Backend: el.backend})
	kube := newKubeClient(el)
	publisher, err := podPublisher(cfg, kube, log)
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, el, kube, log)
	if err != nil {
		return nil, err
	}
	events, stopEvents := eventRecorder(cfg, st, kube, log)
	closeAll := func() { stopEvents(); st.close() }
	defer func() {
		if err != nil {
			closeAll()
		}
	}()

	observers := []election.Observer{m}
	if events != nil {
		observers = append(observers, events)
	}
	if publisher != nil {
		observers = append(observers, publisher)
	}
	elector, err := election.New(election.Config{
		Backend:         m.InstrumentBackend(withTestHooks(st.backend)),
		Identity:        el.identity,
		LeaseDuration:   el.leaseDuration,
		RenewDeadline:   el.renewDeadline,
		RetryPeriod:     el.retryPeriod,
		RenewInterval:   el.renewInterval,
		ReleaseOnCancel: cfg.releaseOnShutdown && publisher == nil,
		ReleaseHoldOff:  cfg.releaseHoldOff,
		Logger:          log,
		Observer:        election.Observers(observers...),
	})
	if err != nil {
		return nil, err
	}
	m.WatchStatus(elector)

	streamsDone := make(chan struct{})
	info := httpapi.Info{Lease: st.lease, Backend: el.backend}
	opts := httpapi.Options{Metrics: m.Handler(), Done: streamsDone, ReleaseTimeout: el.renewDeadline, AnyHost: cfg.exposeAppAPI}
	var gate *appGate
	if cfg.appHealth.url != "" {
		if gate, err = newAppGate(cfg.appHealth, elector, events, el.renewDeadline, log); err != nil {
			return nil, err
		}
		m.WatchAppHealth(gate.Healthy)
		opts.AppHealthy = gate.Healthy
	}
	servers, err := listen(log, []listener{
		{"app", cfg.httpAddress, httpapi.NewAppHandler(elector, info, opts)},
		{"ops", cfg.opsAddress, httpapi.NewOpsHandler(elector, info, opts)},
	})
	if err != nil {
		return nil, err
	}
	return &sidecarParts{cfg: cfg, log: log, elector: elector, publisher: publisher, appGate: gate,
		servers: servers, streamsDone: streamsDone, close: closeAll}, nil
}
