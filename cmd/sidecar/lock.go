package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
)

// runLock is "sidecar lock [flags] -- CMD [ARGS...]": parse and check the
// flags, environment and CMD into a lockConfig, build the candidate from
// it, and run CMD while this candidate leads (see lockUsage for the whole
// contract and the exit statuses).
func runLock(ctx context.Context, p process, args []string) int {
	f := newLockFlags()
	err := parseArgs(f.set, args, lockUsage, p.stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = applyEnv(f.set, p.environ)
	}
	var cfg lockConfig
	if err == nil {
		cfg, err = f.config(p.environ)
	}
	var ce *commandError
	if errors.As(err, &ce) {
		fmt.Fprintf(p.stderr, "sidecar lock: %v\n", err)
		return ce.exitStatus()
	}
	if err != nil {
		fmt.Fprintf(p.stderr, "sidecar lock: %v\n", err)
		return 2
	}
	log := newLogger(cfg.log, p.stderr)
	for _, w := range unknownEnv(p.environ) {
		log.Warn(w)
	}
	el := cfg.election
	log.Info("starting", "version", currentVersion(), "backend", el.backend, "lease", el.leaseName,
		"identity", el.identity, "command", cfg.command[0])
	l, err := buildLocker(ctx, cfg, p, log)
	if err != nil {
		log.Error("sidecar lock failed", "err", err)
		return 1
	}
	defer l.close()
	return l.run(ctx)
}

// locker is sidecar lock, built from its config.
type locker struct {
	cfg     lockConfig
	p       process
	log     *slog.Logger
	elector *election.Elector
	lease   string   // what is elected, as /leader names it
	servers []server // the app API if --http-address, else none
	// stepDowns are the app API's releases and hand-offs, which run only
	// after CMD has been stopped.
	stepDowns *stepDownGate
	// streamsDone is closed to end the open /leader/watch streams.
	streamsDone chan struct{}
	close       func()
}

// buildLocker opens the store (and the app API if asked) and builds an
// elector that releases the lease when it is stopped. The app API's
// release and hand-off go through the locker (see stepDown).
func buildLocker(ctx context.Context, cfg lockConfig, p process, log *slog.Logger) (*locker, error) {
	el := cfg.election
	st, err := openStore(ctx, el, newKubeClient(el), log)
	if err != nil {
		return nil, err
	}
	elector, err := election.New(election.Config{
		Backend:         st.backend,
		Identity:        el.identity,
		LeaseDuration:   el.leaseDuration,
		RenewDeadline:   el.renewDeadline,
		RetryPeriod:     el.retryPeriod,
		RenewInterval:   el.renewInterval,
		ReleaseOnCancel: true,
		Logger:          log,
	})
	if err != nil {
		st.close()
		return nil, err
	}
	streamsDone := make(chan struct{})
	info := httpapi.Info{Lease: st.lease, Backend: el.backend}
	// A step-down waits for CMD to stop (at most --kill-grace), then writes.
	opts := httpapi.Options{Done: streamsDone, ReleaseTimeout: cfg.killGrace + 2*el.renewDeadline}
	gate := newStepDownGate()
	api := httpapi.NewAppHandler(lockElector{elector, gate}, info, opts)
	servers, err := listen(log, []listener{{"app", cfg.httpAddress, api}})
	if err != nil {
		st.close()
		return nil, err
	}
	return &locker{cfg: cfg, p: p, log: log, elector: elector, lease: st.lease,
		servers: servers, stepDowns: gate, streamsDone: streamsDone, close: st.close}, nil
}
