package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// runSidecar is "sidecar [flags]": parse and check the flags and
// environment into a sidecarConfig, build the sidecar from it, run it
// until the first signal (or ctx ends). --help and --version answer before
// anything is checked.
func runSidecar(ctx context.Context, p process, args []string) int {
	f := newSidecarFlags()
	err := parseArgs(f.set, args, rootUsage(), p.stdout)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case err == nil && f.version:
		return printVersion(p)
	case err == nil && f.set.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q: sidecar takes flags, or first a command (%s)",
			f.set.Arg(0), strings.Join(commandNames(), ", "))
	case err == nil:
		err = applyEnv(f.set, p.environ)
	}
	if err == nil && f.version { // LEADER_SIDECAR_VERSION=true
		return printVersion(p)
	}
	var cfg sidecarConfig
	if err == nil {
		cfg, err = f.config(p.environ)
	}
	if err != nil {
		fmt.Fprintf(p.stderr, "sidecar: %v\n", err)
		return 2
	}
	log := newLogger(cfg.log, p.stderr)
	for _, w := range unknownEnv(p.environ) {
		log.Warn(w)
	}
	if cfg.exposeAppAPI {
		log.Warn("the app API is served beyond loopback (--http-allow-remote) and is unauthenticated: "+
			"anyone who can reach it reads the leader's identity and fencing token from GET /leader "+
			"and can POST /leader/release to push this replica out of the election",
			"address", cfg.httpAddress)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go stopOnSignals(p, stop)
	if err := serve(ctx, cfg, log); err != nil {
		log.Error("sidecar failed", "err", err)
		return 1
	}
	return 0
}

// stopOnSignals calls stop on the first signal (stop claiming, release,
// shut down) and exits at once with status 1 on the second.
func stopOnSignals(p process, stop func()) {
	if p.signals == nil {
		return
	}
	<-p.signals
	stop()
	sig := <-p.signals
	fmt.Fprintf(p.stderr, "sidecar: second signal (%v): exiting at once\n", sig)
	os.Exit(1)
}

func printVersion(p process) int {
	fmt.Fprintf(p.stdout, "sidecar %s\n", currentVersion())
	return 0
}
