package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"time"

	"github.com/spf13/pflag"
)

// lockFlags are the flags of sidecar lock: the election flags the sidecar
// has, parsed and checked the same way, and lock's own.
type lockFlags struct {
	set         *pflag.FlagSet
	election    electionFlags
	log         logFlags
	killGrace   time.Duration
	httpAddress string
	timeout     time.Duration
	nonblock    bool
	verbose     bool
}

func newLockFlags() *lockFlags {
	f := &lockFlags{set: newFlagSet("sidecar lock")}
	fs := f.set
	fs.SetInterspersed(false) // the first word that is not a flag is CMD
	f.election.addElection(fs)
	fs.DurationVar(&f.killGrace, "kill-grace", 0, "after leadership is lost (or a release or hand-off is asked for), how long CMD has between SIGTERM and SIGKILL; at most three quarters of --lease-duration minus --renew-deadline (default: half of it, so CMD is killed at the latest by halfway between the end of the claim and the earliest instant another candidate may lead)")
	fs.StringVar(&f.httpAddress, "http-address", "", "serve the app API (GET /leader, /leader/watch, ...) of this candidate on a loopback address, e.g. 127.0.0.1:4040 (default: off)")
	fs.DurationVar(&f.timeout, "timeout", 0, "wait at most this long to lead; if it does not, exit 124 without running CMD (default: wait for ever)")
	fs.BoolVarP(&f.nonblock, "nonblock", "n", false, "if another candidate holds the lock, exit 124 at once without running CMD, as flock -n does")
	f.election.addStore(fs)
	f.log.add(fs, "warn")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "log what the lock does (--log-level info); by default it logs only warnings and errors")
	documentEnv(fs)
	return f
}

// lockConfig is sidecar lock's whole configuration, checked and resolved.
type lockConfig struct {
	election electionConfig
	log      logConfig
	// killGrace is the wait between SIGTERM and SIGKILL once leadership
	// is lost.
	killGrace   time.Duration
	httpAddress string // "" for none
	// timeout bounds the wait to lead (0: for ever); nonblock gives up
	// as soon as the record names another holder.
	timeout  time.Duration
	nonblock bool
	// command is CMD and its arguments; path is CMD as found in $PATH.
	command []string
	path    string
}

// After a renewal that starts at s and is the last to succeed, the lock
// stops claiming at s + renew deadline and sends CMD SIGTERM then; another
// candidate may lead from s + lease duration on, at the earliest (it
// counts the lease from when it saw that renewal, which is after s).
// SIGKILL is due at s + renew deadline + kill grace, so the kill grace
// must end well before the lease does: the rest is the margin for the
// timers' lateness and the reaping.

// defaultKillGrace is half of lease duration minus renew deadline: SIGKILL
// is due halfway between the end of the claim and the earliest instant
// another candidate may lead.
func defaultKillGrace(el electionConfig) time.Duration {
	return (el.leaseDuration - el.renewDeadline) / 2
}

// maxKillGrace is the longest --kill-grace accepted: three quarters of
// lease duration minus renew deadline, leaving a quarter as the margin.
func maxKillGrace(el electionConfig) time.Duration {
	return (el.leaseDuration - el.renewDeadline) * 3 / 4
}

// errNoCommand: sidecar lock was given no CMD.
var errNoCommand = errors.New("no command: want sidecar lock [flags] -- CMD [ARGS...]")

// config checks every flag and CMD. Its error names the flag and the rule
// it broke; a CMD that cannot be found is a *commandError.
func (f *lockFlags) config(environ []string) (lockConfig, error) {
	el, err := f.election.config(environ)
	if err != nil {
		return lockConfig{}, err
	}
	if f.verbose {
		if f.set.Changed("log-level") {
			return lockConfig{}, errors.New("--verbose: is --log-level info; give one of them")
		}
		f.log.level = "info"
	}
	lc, err := f.log.config()
	if err != nil {
		return lockConfig{}, err
	}
	if f.set.Changed("timeout") && f.timeout <= 0 {
		return lockConfig{}, fmt.Errorf("--timeout: must be greater than 0 (for no wait at all, --nonblock), got %v", f.timeout)
	}
	killGrace := defaultKillGrace(el)
	if f.set.Changed("kill-grace") {
		if f.killGrace < 0 {
			return lockConfig{}, fmt.Errorf("--kill-grace: must not be negative, got %v", f.killGrace)
		}
		if most := maxKillGrace(el); f.killGrace > most {
			return lockConfig{}, fmt.Errorf("--kill-grace: must be at most %v (three quarters of --lease-duration minus --renew-deadline), "+
				"so that CMD is killed with a margin before another candidate may lead; got %v (raise --lease-duration for a longer grace)",
				most, f.killGrace)
		}
		killGrace = f.killGrace
	}
	if f.httpAddress != "" {
		if err := checkAddress("--http-address", f.httpAddress); err != nil {
			return lockConfig{}, err
		}
		if !loopbackAddress(f.httpAddress) {
			return lockConfig{}, fmt.Errorf("--http-address: must be a loopback address (127.0.0.0/8, [::1] or localhost), got %q", f.httpAddress)
		}
	}
	command := f.set.Args()
	if len(command) == 0 || command[0] == "" {
		return lockConfig{}, errNoCommand
	}
	path, err := exec.LookPath(command[0])
	if err != nil {
		return lockConfig{}, &commandError{err}
	}
	return lockConfig{election: el, log: lc, killGrace: killGrace, httpAddress: f.httpAddress,
		timeout: f.timeout, nonblock: f.nonblock, command: command, path: path}, nil
}

// commandError is a CMD that cannot be run: not found (exit status 127,
// as a shell answers) or not executable (126).
type commandError struct{ err error }

func (e *commandError) Error() string { return e.err.Error() }

func (e *commandError) exitStatus() int {
	if errors.Is(e.err, exec.ErrNotFound) || errors.Is(e.err, fs.ErrNotExist) {
		return 127
	}
	return 126
}
