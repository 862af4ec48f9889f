package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
	"github.com/leader-sidecar/leader-sidecar/pkg/podreadiness"
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

// sidecarFlags are the flags of the sidecar itself (sidecar with no
// command word): the election flags every command shares, then its own.
type sidecarFlags struct {
	set               *pflag.FlagSet
	election          electionFlags
	log               logFlags
	releaseHoldOff    time.Duration
	releaseOnShutdown bool
	httpAddress       string
	httpAllowRemote   bool
	opsAddress        string
	events            bool
	readinessMode     string
	conditionType     string
	roleLabel         string
	appHealth         appHealthFlags
	version           bool
}

func newSidecarFlags() *sidecarFlags {
	f := &sidecarFlags{set: newFlagSet("sidecar")}
	fs := f.set
	f.election.addElection(fs)
	fs.DurationVar(&f.releaseHoldOff, "release-hold-off", 0, "how long POST /leader/release keeps this candidate out of the election (default: --lease-duration)")
	fs.BoolVar(&f.releaseOnShutdown, "release-on-shutdown", true, "release the lease on SIGTERM/SIGINT/SIGHUP so a standby takes over at once; safe only if the app stops acting as leader first")
	fs.StringVar(&f.httpAddress, "http-address", "127.0.0.1:4040", "address of the app API; must be loopback (127.0.0.0/8, [::1] or localhost) unless --http-allow-remote")
	fs.BoolVar(&f.httpAllowRemote, "http-allow-remote", false, "allow a non-loopback --http-address. Risky: the app API is unauthenticated, so anyone who can reach the address reads the leader's identity and fencing token from GET /leader and can POST /leader/release to push this replica out of the election, replica after replica")
	fs.StringVar(&f.opsAddress, "ops-address", "", "address of the read-only health, readiness and metrics listener, e.g. :8081 (default: off)")
	f.election.addStore(fs)
	fs.BoolVar(&f.events, "events", true, "record Kubernetes Events when this sidecar starts or stops leading (needs POD_NAME)")
	fs.StringVar(&f.readinessMode, "readiness-mode", "none", "publish leadership on the Pod: none, probe (use /leader/ready), pod-condition (for readinessGates) or label")
	fs.StringVar(&f.conditionType, "readiness-condition-type", "leader-sidecar.io/leader", "Pod condition kept in pod-condition mode (domain-qualified)")
	fs.StringVar(&f.roleLabel, "role-label", "leader-sidecar.io/role", "Pod label kept in label mode, set to leader or follower")
	f.appHealth.add(fs)
	f.log.add(fs, "info")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	documentEnv(fs)
	return f
}

var readinessModes = []string{"none", "probe", "pod-condition", "label"}

// sidecarConfig is the sidecar's whole configuration, checked and
// resolved. The sidecar is built from it alone.
type sidecarConfig struct {
	election          electionConfig
	log               logConfig
	releaseHoldOff    time.Duration
	releaseOnShutdown bool
	httpAddress       string
	// exposeAppAPI: the app API is deliberately served beyond loopback;
	// its POST then accepts any Host header, and start-up warns.
	exposeAppAPI bool
	opsAddress   string // "" for none
	events       bool
	readiness    podreadiness.Mode
	// conditionType and roleLabel name what pod-condition and label
	// modes keep on the Pod.
	conditionType string
	roleLabel     string
	// appHealth gates candidacy on the app's health; url "" for none.
	appHealth appHealthConfig
}

// config checks every flag and resolves what depends on the environment.
// Its error names the flag and the rule it broke.
func (f *sidecarFlags) config(environ []string) (sidecarConfig, error) {
	el, err := f.election.config(environ)
	if err != nil {
		return sidecarConfig{}, err
	}
	if err := f.check(); err != nil {
		return sidecarConfig{}, err
	}
	lc, err := f.log.config()
	if err != nil {
		return sidecarConfig{}, err
	}
	ah, err := f.appHealth.config(f.httpAddress, f.opsAddress)
	if err != nil {
		return sidecarConfig{}, err
	}
	return sidecarConfig{
		appHealth:         ah,
		election:          el,
		log:               lc,
		releaseHoldOff:    f.releaseHoldOff,
		releaseOnShutdown: f.releaseOnShutdown,
		httpAddress:       f.httpAddress,
		exposeAppAPI:      f.httpAllowRemote && !loopbackAddress(f.httpAddress),
		opsAddress:        f.opsAddress,
		events:            f.events,
		readiness:         podreadiness.Mode(f.readinessMode),
		conditionType:     f.conditionType,
		roleLabel:         f.roleLabel,
	}, nil
}

func (f *sidecarFlags) check() error {
	if f.releaseHoldOff < 0 {
		return fmt.Errorf("--release-hold-off: must not be negative, got %v", f.releaseHoldOff)
	}
	if err := checkAppAddress("--http-address", f.httpAddress, f.httpAllowRemote); err != nil {
		return err
	}
	if f.opsAddress != "" {
		if err := checkAddress("--ops-address", f.opsAddress); err != nil {
			return err
		}
		if f.opsAddress == f.httpAddress && !strings.HasSuffix(f.opsAddress, ":0") {
			return fmt.Errorf("--ops-address: must differ from --http-address (both %q)", f.opsAddress)
		}
	}
	if !slices.Contains(readinessModes, f.readinessMode) {
		return oneOf("--readiness-mode", f.readinessMode, readinessModes)
	}
	if errs := validation.IsQualifiedName(f.conditionType); len(errs) > 0 || !strings.Contains(f.conditionType, "/") {
		return fmt.Errorf("--readiness-condition-type: must be a domain-qualified name such as example.com/leader, got %q", f.conditionType)
	}
	if errs := validation.IsQualifiedName(f.roleLabel); len(errs) > 0 {
		return fmt.Errorf("--role-label: %q is not a valid label key: %s", f.roleLabel, strings.Join(errs, "; "))
	}
	return nil
}

// checkAppAddress checks the address of an app API: host:port, and
// loopback unless allowRemote.
func checkAppAddress(flag, addr string, allowRemote bool) error {
	if err := checkAddress(flag, addr); err != nil {
		return err
	}
	if !allowRemote && !loopbackAddress(addr) {
		return fmt.Errorf("%s: must be a loopback address (127.0.0.0/8, [::1] or localhost) unless --http-allow-remote is given, got %q", flag, addr)
	}
	return nil
}

// loopbackAddress reports whether a valid host:port listens on loopback
// only. An empty host (":4040") listens on every interface.
func loopbackAddress(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && httpapi.IsLoopbackHost(host)
}

func checkAddress(flag, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: must be host:port, got %q", flag, addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%s: port must be a number from 0 to 65535, got %q", flag, port)
	}
	return nil
}
