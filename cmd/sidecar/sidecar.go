package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
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
	if cfg.exposeAppAPI() {
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
// variables, and checks them (sidecarConfig.check): the one path of the
// sidecar and of sidecar check, so check refuses exactly what the sidecar
// refuses. On --help (usage above the flags) or --version it writes the
// answer to p.stdout and returns answered; an error is the one-line
// refusal, which names the flag or the variable; takes says, after an
// unexpected argument, what the command takes.
func parseSidecar(p process, args []string, usage, takes string) (_ sidecarConfig, answered bool, err error) {
	cfg := newSidecarConfig()
	err = parseArgs(cfg.set, args, usage, p.stdout)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return sidecarConfig{}, true, nil
	case err == nil && cfg.version:
		printVersion(p)
		return sidecarConfig{}, true, nil
	case err == nil && cfg.set.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q: %s", cfg.set.Arg(0), takes)
	}
	given := givenOnCommandLine(cfg.set)
	if err == nil {
		err = applyEnv(cfg.set, p.environ)
	}
	if err == nil && cfg.version { // LEADER_SIDECAR_VERSION=true
		printVersion(p)
		return sidecarConfig{}, true, nil
	}
	if err == nil {
		if err = cfg.check(p.environ); err != nil {
			err = blameEnv(err, given, p.environ)
		}
	}
	if err != nil {
		return sidecarConfig{}, false, err
	}
	return *cfg, false, nil
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

// sidecarConfig is the sidecar's whole configuration: newSidecarConfig
// binds its flags straight into it (each flag's default and help beside
// the field), check validates and resolves it in place. The sidecar is
// built from it alone.
type sidecarConfig struct {
	// set holds the sidecar's flags, bound to the fields below.
	set               *pflag.FlagSet
	election          electionConfig
	releaseHoldOff    time.Duration
	releaseOnShutdown bool
	// awaitReplacement leaves a stopping leader's release to its own
	// replacement or another revision for that long (0: off).
	awaitReplacement time.Duration
	httpAddress      string
	// httpAllowRemote lets httpAddress be beyond loopback (exposeAppAPI).
	httpAllowRemote bool
	opsAddress      string // "" for none
	events          bool
	readiness       podreadiness.Mode
	// conditionType and roleLabel name what pod-condition and label
	// modes keep on the Pod.
	conditionType string
	roleLabel     string
	// podDeletionCost keeps the leader's Pod for last in a ReplicaSet's
	// scale-down (podreadiness, DeletionCost): lease backend, one
	// election, a known Pod.
	podDeletionCost bool
	// appHealth gates candidacy on the app's health; url "" for none.
	appHealth appHealthConfig
	shards    shardsConfig
	log       logConfig
	version   bool
}

// newSidecarConfig returns the sidecar's configuration at its defaults,
// its flags bound in set: the election flags every command that joins an
// election shares, then the sidecar's own.
func newSidecarConfig() *sidecarConfig {
	c := &sidecarConfig{set: newFlagSet("sidecar")}
	fs := c.set
	c.election.addElection(fs)
	fs.DurationVar(&c.releaseHoldOff, "release-hold-off", 0, "how long POST /leader/release keeps this candidate out of the election (default: --lease-duration)")
	docDefault(fs, "release-hold-off", "`--lease-duration`")
	docMeaning(fs, "release-hold-off", "how long `POST /leader/release` keeps this sidecar out of the election")
	fs.BoolVar(&c.releaseOnShutdown, "release-on-shutdown", true, "release the lease on SIGTERM/SIGINT/SIGHUP so a standby takes over at once; safe only if the app stops acting as leader first")
	docMeaning(fs, "release-on-shutdown", "release the lease on SIGTERM/SIGINT/SIGHUP so a standby takes over at once")
	fs.DurationVar(&c.awaitReplacement, "await-replacement", 0, "stopping as leader, release without a hand-off and leave the lease for this long to this Pod's replacement (the same Pod name: a StatefulSet's) or a Pod of another revision, so a StatefulSet's rollout moves leadership once; the election has no leader while the replacement starts, and up to this long when none comes (default: off)")
	docDefault(fs, "await-replacement", "off")
	docMeaning(fs, "await-replacement", "stopping as leader, release without a hand-off and leave the lease for this long to this Pod's replacement (the same Pod name, as a StatefulSet's) or to a Pod of another revision, so a StatefulSet's rollout moves leadership once; the cost is no leader while the replacement starts, and up to this long when none comes, as in a scale-down (see [Rollouts](kubernetes.md#rollouts))")
	fs.StringVar(&c.httpAddress, "http-address", "127.0.0.1:4040", "address of the app API; must be loopback (127.0.0.0/8, [::1] or localhost) unless --http-allow-remote")
	docMeaning(fs, "http-address", "the app API; must be loopback (`127.0.0.0/8`, `[::1]`, `localhost`) unless `--http-allow-remote`")
	fs.BoolVar(&c.httpAllowRemote, "http-allow-remote", false, "allow a non-loopback --http-address. Risky: the app API is unauthenticated, so anyone who can reach the address reads the leader's identity and fencing token from GET /leader and can POST /leader/release to push this replica out of the election, replica after replica")
	docMeaning(fs, "http-allow-remote", "allow a non-loopback `--http-address`; risky, see [HTTP API](http-api.md) (logs a warning)")
	fs.StringVar(&c.opsAddress, "ops-address", "", "address of the read-only health, readiness and metrics listener, e.g. :8081 (default: off)")
	docDefault(fs, "ops-address", "off")
	docMeaning(fs, "ops-address", "read-only probes and metrics listener, e.g. `:8081`")
	c.election.addStore(fs)
	fs.BoolVar(&c.events, "events", true, "record Kubernetes Events when this sidecar starts or stops leading (needs POD_NAME)")
	docMeaning(fs, "events", "record Kubernetes Events when this sidecar starts or stops leading, and Warning Events for the problems it finds in the record (a token that went back or ran out, a lease duration beyond `--max-record-lease-duration`) (needs `POD_NAME`)")
	fs.StringVar((*string)(&c.readiness), "readiness-mode", string(podreadiness.ModeNone), "publish leadership on the Pod: none, probe (use /leader/ready), pod-condition (for readinessGates) or label")
	docMeaning(fs, "readiness-mode", "publish leadership on the Pod: `none`, `probe`, `pod-condition`, `label` (see [Leadership on the Pod](kubernetes.md#leadership-on-the-pod))")
	fs.StringVar(&c.conditionType, "readiness-condition-type", "leader-sidecar.io/leader", "Pod condition kept in pod-condition mode (domain-qualified)")
	docMeaning(fs, "readiness-condition-type", "the Pod condition of `pod-condition` mode")
	fs.StringVar(&c.roleLabel, "role-label", "leader-sidecar.io/role", "Pod label kept in label mode, set to leader or follower")
	docMeaning(fs, "role-label", "the Pod label of `label` mode (`leader` or `follower`)")
	fs.BoolVar(&c.podDeletionCost, "pod-deletion-cost", true, "while this replica leads, annotate its Pod with controller.kubernetes.io/pod-deletion-cost so a ReplicaSet removes it last and a rollout moves leadership once (lease backend; needs get and patch on pods, else it stays off)")
	docMeaning(fs, "pod-deletion-cost", "while this replica leads, its Pod carries `controller.kubernetes.io/pod-deletion-cost`, so a ReplicaSet removes it last and a rollout moves leadership once (`lease` backend, not in shard mode; needs `get` and `patch` on `pods`, else it logs once and stays off; see [Rollouts](kubernetes.md#rollouts))")
	c.appHealth.add(fs)
	c.shards.add(fs)
	c.log.add(fs, sidecarLogLevel)
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	docDefault(fs, "version", "")
	docMeaning(fs, "version", "print the version and exit, before reading the environment or checking anything else")
	documentEnv(fs)
	return c
}

// check checks every setting and resolves what depends on the
// environment (see electionConfig.check). Its error names the flag and
// the rule it broke.
func (c *sidecarConfig) check(environ []string) error {
	if err := c.election.check(environ); err != nil {
		return err
	}
	if c.releaseHoldOff < 0 {
		return fmt.Errorf("--release-hold-off: must not be negative, got %v", c.releaseHoldOff)
	}
	if err := c.checkAwaitReplacement(); err != nil {
		return err
	}
	if err := checkAppAddress("--http-address", c.httpAddress, c.httpAllowRemote); err != nil {
		return err
	}
	if c.opsAddress != "" {
		if err := checkAddress("--ops-address", c.opsAddress); err != nil {
			return err
		}
		if c.opsAddress == c.httpAddress && !strings.HasSuffix(c.opsAddress, ":0") {
			return fmt.Errorf("--ops-address: must differ from --http-address (both %q)", c.opsAddress)
		}
		if at, clash := sameListener(c.opsAddress, c.httpAddress); clash {
			return fmt.Errorf("--ops-address: %q and --http-address %q would both listen on %s: give them different ports", c.opsAddress, c.httpAddress, at)
		}
	}
	if !slices.Contains(podreadiness.Modes, c.readiness) {
		return oneOf("--readiness-mode", c.readiness, podreadiness.Modes)
	}
	if errs := validation.IsQualifiedName(c.conditionType); len(errs) > 0 || !strings.Contains(c.conditionType, "/") {
		return fmt.Errorf("--readiness-condition-type: must be a domain-qualified name such as example.com/leader, got %q", c.conditionType)
	}
	if errs := validation.IsQualifiedName(c.roleLabel); len(errs) > 0 {
		return fmt.Errorf("--role-label: %q is not a valid label key: %s", c.roleLabel, strings.Join(errs, "; "))
	}
	if err := c.log.check(); err != nil {
		return err
	}
	if err := c.appHealth.check(c.httpAddress, c.opsAddress); err != nil {
		return err
	}
	return c.shards.check(c)
}

// checkAwaitReplacement checks --await-replacement: whole milliseconds,
// within what a standby waits a reserve out for (--max-record-lease-
// duration), and with a release on shutdown to carry it, one election.
func (c *sidecarConfig) checkAwaitReplacement() error {
	d := c.awaitReplacement
	switch {
	case d == 0:
		return nil
	case election.ValidateAwaitReplacement(d) != nil:
		return fmt.Errorf("--await-replacement: must be 0 (off) or a positive whole number of milliseconds, got %v", d)
	case d > c.election.maxRecordLease:
		return fmt.Errorf("--await-replacement: %v is beyond --max-record-lease-duration %v, the longest a standby leaves a lease to a replacement", d, c.election.maxRecordLease)
	case !c.releaseOnShutdown:
		return fmt.Errorf("--await-replacement: needs --release-on-shutdown, which writes the release it leaves to the replacement")
	case c.shards.count > 0:
		return fmt.Errorf("--await-replacement: not in shard mode (--shards %d), where a stopping replica drains and releases its shards", c.shards.count)
	}
	return nil
}

// exposeAppAPI: the app API is deliberately served beyond loopback; its
// POST then accepts any Host header, and start-up warns.
func (c *sidecarConfig) exposeAppAPI() bool {
	return c.httpAllowRemote && !loopbackAddress(c.httpAddress)
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
