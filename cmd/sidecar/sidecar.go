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
// environment into a sidecarConfig (parseSidecar), build the sidecar from
// it, run it until the first signal (or ctx ends). --help and --version
// answer before anything is checked.
func runSidecar(ctx context.Context, p process, args []string) int {
	takes := "sidecar takes flags, or first a command (" + strings.Join(commandNames(), ", ") + ")"
	cfg, answered, err := parseSidecar(p, args, rootUsage(), takes)
	if answered {
		return 0
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
		log.Warn(exposedAppAPIWarning, "address", cfg.httpAddress)
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

// exposedAppAPIWarning is what the sidecar (and sidecar check) warns of
// when the app API is served beyond loopback.
const exposedAppAPIWarning = "the app API is served beyond loopback (--http-allow-remote) and is unauthenticated: " +
	"anyone who can reach it reads the leader's identity and fencing token from GET /leader " +
	"and can POST /leader/release to push this replica out of the election"

// parseSidecar parses the sidecar's flags, then its LEADER_SIDECAR_*
// variables, and checks them into a sidecarConfig: the one path of the
// sidecar and of sidecar check, so check refuses exactly what the sidecar
// refuses. On --help (usage above the flags) or --version it writes the
// answer to p.stdout and returns answered; an error is the one-line
// refusal, which names the flag or the variable; takes says, after an
// unexpected argument, what the command takes.
func parseSidecar(p process, args []string, usage, takes string) (cfg sidecarConfig, answered bool, err error) {
	f := newSidecarFlags()
	err = parseArgs(f.set, args, usage, p.stdout)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return cfg, true, nil
	case err == nil && f.version:
		printVersion(p)
		return cfg, true, nil
	case err == nil && f.set.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q: %s", f.set.Arg(0), takes)
	case err == nil:
		err = applyEnv(f.set, p.environ)
	}
	if err == nil && f.version { // LEADER_SIDECAR_VERSION=true
		printVersion(p)
		return cfg, true, nil
	}
	if err != nil {
		return cfg, false, err
	}
	cfg, err = f.config(p.environ)
	return cfg, false, err
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
