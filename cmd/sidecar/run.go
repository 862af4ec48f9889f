package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// shutdownTimeout bounds the HTTP servers' graceful shutdown and the last
// publication on the Pod.
const shutdownTimeout = 5 * time.Second

// serve builds the sidecar from cfg and runs it until ctx ends.
func serve(ctx context.Context, cfg sidecarConfig, log *slog.Logger) error {
	el := cfg.election
	log.Info("starting", "version", currentVersion(), "backend", el.backend, "lease", el.leaseName, "identity", el.identity)
	parts, err := buildSidecar(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer parts.close()
	return parts.run(ctx)
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
	if !p.cfg.releaseOnShutdown {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.election.renewDeadline)
	defer cancel()
	if _, err := p.elector.Release(ctx); err != nil && !errors.Is(err, election.ErrNotLeader) {
		p.log.Warn("could not release the lease on shutdown; standbys will wait for it to expire", "err", err)
	}
}
