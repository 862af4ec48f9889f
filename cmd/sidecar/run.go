package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
	"github.com/leader-sidecar/leader-sidecar/pkg/metrics"
)

// shutdownTimeout bounds the HTTP servers' graceful shutdown and the last
// publication on the Pod.
const shutdownTimeout = 5 * time.Second

// run is the whole program; ctx ending is the shutdown signal. It returns
// the exit status.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if sub, ok := findSubcommand(args[0]); ok {
			return sub.run(ctx, args[1:], environ, stdout, stderr)
		}
		if args[0] == "help" {
			args = []string{"--help"}
		}
	}
	// --help and --version answer before any validation.
	o, warnings, err := parseOptions(args, environ, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err == nil && o.version {
		fmt.Fprintf(stdout, "sidecar %s\n", currentVersion())
		return 0
	}
	if err == nil {
		err = validate(o)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sidecar: %v\n", err)
		return 2
	}
	log := newLogger(o, stderr)
	for _, w := range warnings {
		log.Warn(w)
	}
	if exposesAppAPI(o) {
		log.Warn("the app API is served beyond loopback (--http-allow-remote) and is unauthenticated: "+
			"anyone who can reach it reads the leader's identity and fencing token from GET /leader "+
			"and can POST /leader/release to push this replica out of the election",
			"address", o.httpAddress)
	}
	if err := serve(ctx, o, environ, log); err != nil {
		log.Error("sidecar failed", "err", err)
		return 1
	}
	return 0
}

// serve opens the store and listeners, runs the election until ctx ends,
// then releases (if configured) and shuts the servers down.
func serve(ctx context.Context, o *options, environ []string, log *slog.Logger) error {
	kind := resolveBackend(o, environ)
	identity := election.NewIdentity(identityPrefix(o, environ))
	log.Info("starting", "version", currentVersion(), "backend", kind, "lease", o.leaseName, "identity", identity)
	m := metrics.New(metrics.BuildInfo{Version: currentVersion(), Backend: kind})
	s := newSetup(o, environ, identity, log)
	publisher, err := s.podPublisher()
	if err != nil {
		return err
	}
	st, err := openers[kind](ctx, s)
	if err != nil {
		return err
	}
	defer st.close()

	observers := []election.Observer{m}
	if st.observer != nil {
		observers = append(observers, st.observer)
	}
	if publisher != nil {
		observers = append(observers, publisher)
	}
	elector, err := election.New(election.Config{
		Backend:         m.InstrumentBackend(st.backend),
		Identity:        identity,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		RenewInterval:   o.renewInterval,
		ReleaseOnCancel: o.releaseOnShutdown && publisher == nil,
		ReleaseHoldOff:  o.releaseHoldOff,
		Logger:          log,
		Observer:        election.Observers(observers...),
	})
	if err != nil {
		return err
	}
	m.WatchStatus(elector)

	streamsDone := make(chan struct{})
	info := httpapi.Info{Lease: st.lease, Backend: kind}
	opts := httpapi.Options{Metrics: m.Handler(), Done: streamsDone, ReleaseTimeout: o.renewDeadline, AnyHost: exposesAppAPI(o)}
	servers, err := listen(log, []listener{
		{"app", o.httpAddress, httpapi.NewAppHandler(elector, info, opts)},
		{"ops", o.opsAddress, httpapi.NewOpsHandler(elector, info, opts)},
	})
	if err != nil {
		return err
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	serveErr := make(chan error, len(servers))
	for _, s := range servers {
		go func() { serveErr <- s.serve() }()
	}
	electionDone := make(chan struct{})
	var electionErr error
	go func() {
		defer close(electionDone)
		electionErr = elector.Run(runCtx)
	}()
	var waitPublisher func()
	if publisher != nil {
		waitPublisher = runPublisher(publisher, electionDone)
	}

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
	if publisher != nil {
		unmarkThenRelease(o, elector, waitPublisher, log)
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

// unmarkThenRelease lets the Pod publisher take the leader's mark off the
// Pod before the lease is released (the elector was told not to release
// on its own), so two Pods never show leadership at once after a graceful
// stop.
func unmarkThenRelease(o *options, elector *election.Elector, waitPublisher func(), log *slog.Logger) {
	waitPublisher()
	if !o.releaseOnShutdown {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.renewDeadline)
	defer cancel()
	if _, err := elector.Release(ctx); err != nil {
		log.Warn("could not release the lease on shutdown; standbys will wait for it to expire", "err", err)
	}
}

type listener struct {
	name, address string
	handler       http.Handler
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
			return nil, fmt.Errorf("%s listener: %w", l.name, err)
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
