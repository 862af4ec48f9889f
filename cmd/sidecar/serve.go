package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeevents"
	"github.com/leader-sidecar/leader-sidecar/pkg/metrics"
	"github.com/leader-sidecar/leader-sidecar/pkg/podreadiness"
)

// shutdownTimeout bounds the HTTP servers' graceful shutdown and the last
// publication on the Pod.
const shutdownTimeout = 5 * time.Second

// serve builds the sidecar from cfg and runs it until ctx ends.
func serve(ctx context.Context, cfg sidecarConfig, log *slog.Logger) error {
	el := cfg.election
	log.Info("starting", "version", currentVersion(), "backend", el.backend, "lease", el.leaseName, "identity", el.identity)
	if cfg.shards.enabled() {
		return serveShards(ctx, cfg, log)
	}
	parts, err := buildSidecar(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer parts.close()
	return parts.run(ctx)
}

// sidecarParts is everything the sidecar runs, built from its config.
type sidecarParts struct {
	cfg       sidecarConfig
	log       *slog.Logger
	elector   *election.Elector
	publisher *podreadiness.Publisher // nil unless the mode PublishesOnPod
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
	m := metrics.New(metrics.Info{Lease: el.leaseName, Version: currentVersion(), Backend: el.backend, Identity: el.identity})
	kube := el.kubeClients()
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
	ec := el.electorConfig(m.InstrumentBackend(withTestHooks(st.backend)), log)
	// A mark that shows leadership (a label, a condition) comes off the
	// Pod before the release; a deletion cost alone need not delay it.
	ec.ReleaseOnCancel = cfg.releaseOnShutdown && !cfg.readiness.PublishesOnPod()
	// Stopping, the leader hands off, to a Pod of another revision first
	// (a rollout's new one), and releases only without a taker.
	ec.HandoffOnStop = ec.ReleaseOnCancel
	ec.AwaitReplacement = cfg.awaitReplacement
	ec.Revision = el.pod.revision
	ec.ReleaseHoldOff = cfg.releaseHoldOff
	ec.Observer = election.Observers(observers...)
	elector, err := election.New(ec)
	if err != nil {
		return nil, err
	}
	m.WatchStatus(elector)

	streamsDone := make(chan struct{})
	info := httpapi.Info{Lease: st.lease, Backend: el.backend}
	opts := httpapi.Options{Metrics: m.Handler(), Done: streamsDone, ReleaseTimeout: el.renewDeadline, AnyHost: cfg.exposeAppAPI()}
	var gate *appGate
	if cfg.appHealth.url != "" {
		if gate, err = newAppGate(cfg.appHealth, elector, events, el.renewDeadline, log); err != nil {
			return nil, err
		}
		m.WatchAppHealth(gate.Healthy)
		opts.AppHealthy = gate.Healthy
	}
	servers, err := listen(log, []listener{
		{"app", "--http-address", cfg.httpAddress, httpapi.NewAppHandler(elector, info, opts)},
		{"ops", "--ops-address", cfg.opsAddress, httpapi.NewOpsHandler(elector, info, opts)},
	})
	if err != nil {
		return nil, err
	}
	return &sidecarParts{cfg: cfg, log: log, elector: elector, publisher: publisher, appGate: gate,
		servers: servers, streamsDone: streamsDone, close: closeAll}, nil
}

// run serves and runs the election until ctx ends, a server fails or the
// store is lost; then it stops claiming, releases (if configured), and
// shuts the servers down.
func (p *sidecarParts) run(ctx context.Context) error {
	log := p.log
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	serveErr := make(chan error, len(p.servers))
	for _, s := range p.servers {
		go func() { serveErr <- s.serve() }()
	}
	electionDone := make(chan struct{})
	var electionErr error
	go func() {
		defer close(electionDone)
		electionErr = p.elector.Run(runCtx)
	}()
	if p.appGate != nil {
		go p.appGate.run(runCtx)
	}
	var waitPublisher func()
	if p.publisher != nil {
		waitPublisher = runPublisher(p.publisher, electionDone)
	}

	var err error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err = <-serveErr:
		log.Error("HTTP server failed; shutting down", "err", err)
	case <-electionDone:
		// Only a lost store ends the election on its own: exit, so that
		// the restarted container opens the store now at the path.
		err = fmt.Errorf("the election stopped: %w", electionErr)
		log.Error("the election stopped; exiting", "err", electionErr)
	}
	stop()
	<-electionDone // stopped claiming, released if configured
	if p.publisher != nil {
		p.unmarkThenRelease(waitPublisher)
	}
	close(p.streamsDone)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	for _, s := range p.servers {
		_ = s.srv.Shutdown(shutdownCtx)
	}
	log.Info("stopped")
	return err
}

// unmarkThenRelease lets the Pod publisher take the leader's mark off the
// Pod before the lease is released (the elector was told not to release
// on its own), so two Pods never show leadership at once after a graceful
// stop.
func (p *sidecarParts) unmarkThenRelease(waitPublisher func()) {
	waitPublisher()
	if !p.cfg.releaseOnShutdown || !p.cfg.readiness.PublishesOnPod() {
		return // nothing to release, or the elector released already
	}
	// A lease more for a record this replica created and would have
	// claimed only later, which it releases once that claim could begin.
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.election.leaseDuration+p.cfg.election.renewDeadline)
	defer cancel()
	if _, err := p.elector.Release(ctx); err != nil && !errors.Is(err, election.ErrNotLeader) {
		p.log.Warn("could not release the lease on shutdown; standbys will wait for it to expire", "err", err)
	}
}

// podPublisher returns the publisher of a --readiness-mode that
// PublishesOnPod (pod-condition, label) and of the deletion cost
// (deletionCostOn), or nil when there is neither.
func podPublisher(cfg sidecarConfig, kube *kubeclient.Clients, log *slog.Logger) (*podreadiness.Publisher, error) {
	mode := cfg.readiness
	cost := deletionCostOn(cfg, log)
	if !mode.PublishesOnPod() && !cost {
		return nil, nil
	}
	client, err := kube.Others()
	switch {
	case err != nil && mode.PublishesOnPod():
		return nil, fmt.Errorf("--readiness-mode %s needs the Kubernetes API: %w", mode, err)
	case err != nil:
		log.Warn("the leader's Pod gets no deletion cost", "reason", "no Kubernetes client", "err", err)
		return nil, nil
	}
	pod := cfg.election.pod
	p, err := podreadiness.New(podreadiness.Config{
		Client:        client,
		Namespace:     pod.namespace,
		Name:          pod.name,
		UID:           pod.uid,
		Mode:          mode,
		ConditionType: cfg.conditionType,
		LabelKey:      cfg.roleLabel,
		DeletionCost:  cost,
		Identity:      cfg.election.identity,
		Logger:        log,
	})
	if err != nil {
		return nil, fmt.Errorf("--readiness-mode %s: %w", mode, err)
	}
	return p, nil
}

// deletionCostOn reports whether the leader's Pod carries the deletion
// cost: --pod-deletion-cost, on the lease backend (the store that runs in
// a cluster), in a Pod whose name and UID are known; why not is logged
// when the flag is on.
func deletionCostOn(cfg sidecarConfig, log *slog.Logger) bool {
	pod := cfg.election.pod
	reason := ""
	switch {
	case !cfg.podDeletionCost:
		return false
	case cfg.election.backend != "lease":
		reason = "the backend is " + cfg.election.backend + ", not lease"
	case pod.name == "" || pod.uid == "" || pod.namespace == "":
		reason = "POD_NAME, POD_NAMESPACE and POD_UID are not all set"
	default:
		return true
	}
	log.Info("the leader's Pod gets no deletion cost", "reason", reason)
	return false
}

// runPublisher runs p until the election is over, then lets it publish
// the final "follower" for at most shutdownTimeout.
func runPublisher(p *podreadiness.Publisher, electionDone <-chan struct{}) (wait func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	return func() {
		<-electionDone
		drainCtx, stop := context.WithTimeout(context.Background(), shutdownTimeout)
		defer stop()
		_ = p.Drain(drainCtx)
		cancel()
		<-done
	}
}

// eventRecorder returns the recorder of Kubernetes Events for the Lease
// st, or nil when there is none to record (eventsPod, newEventRecorder).
// stop stops it.
func eventRecorder(cfg sidecarConfig, st *store, kube *kubeclient.Clients, log *slog.Logger) (obs election.Observer, stop func()) {
	pod, ok := eventsPod(cfg, log)
	if !ok {
		return nil, func() {}
	}
	return newEventRecorder(cfg, pod, kube, st.namespace, cfg.election.leaseName, log)
}

// eventsPod is the Pod that Kubernetes Events are about, or false when
// none are to be recorded: another backend than lease, --events=false or
// no POD_NAME (logged).
func eventsPod(cfg sidecarConfig, log *slog.Logger) (kubeevents.Pod, bool) {
	if cfg.election.backend != "lease" {
		return kubeevents.Pod{}, false
	}
	pod := kubeevents.Pod{Namespace: cfg.election.pod.namespace, Name: cfg.election.pod.name, UID: cfg.election.pod.uid}
	if pod.Name == "" || !cfg.events {
		reason := "POD_NAME is not set"
		if !cfg.events {
			reason = "--events=false"
		}
		log.Info("not recording Kubernetes Events", "reason", reason)
		return kubeevents.Pod{}, false
	}
	return pod, true
}

// newEventRecorder returns the recorder of Kubernetes Events about pod
// related to Lease leaseName in namespace, or nil when it cannot be made
// (logged). stop stops it.
func newEventRecorder(cfg sidecarConfig, pod kubeevents.Pod, kube *kubeclient.Clients, namespace, leaseName string, log *slog.Logger) (obs election.Observer, stop func()) {
	client, err := kube.Others()
	if err == nil {
		var rec *kubeevents.Recorder
		if rec, err = kubeevents.New(kubeevents.Config{Client: client, Pod: pod, LeaseNamespace: namespace,
			LeaseName: leaseName, Identity: cfg.election.identity, Logger: log}); err == nil {
			return rec, rec.Stop
		}
	}
	log.Warn("not recording Kubernetes Events", "lease", leaseName, "err", err)
	return nil, func() {}
}

// listener is one of the sidecar's HTTP listeners: its name in the logs,
// the flag that sets its address, and what it serves.
type listener struct {
	name, flag, address string
	handler             http.Handler
}

type server struct {
	srv *http.Server
	ln  net.Listener
}

func (s server) serve() error {
	if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// listen binds every listener with an address, before the sidecar joins
// the election, so a port conflict stops it early.
func listen(log *slog.Logger, ls []listener) ([]server, error) {
	var servers []server
	for _, l := range ls {
		if l.address == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.address)
		if err != nil {
			for _, s := range servers {
				_ = s.ln.Close()
			}
			return nil, fmt.Errorf("%s: the %s listener: %w", l.flag, l.name, err)
		}
		log.Info("serving", "listener", l.name, "address", ln.Addr().String())
		servers = append(servers, server{
			srv: &http.Server{
				Handler:           l.handler,
				ReadHeaderTimeout: 5 * time.Second,
				ReadTimeout:       10 * time.Second,
				IdleTimeout:       60 * time.Second,
				ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
			},
			ln: ln,
		})
	}
	return servers, nil
}
