package main

import (
	"time"

	"github.com/spf13/pflag"
)

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
