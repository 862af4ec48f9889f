package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
	"github.com/leader-sidecar/leader-sidecar/pkg/supervise"
)

// runLock is "sidecar lock [flags] -- CMD [ARGS...]": parse and check the
// flags, environment and CMD into a lockConfig, build the candidate from
// it, and run CMD while this candidate leads (see lockUsage for the whole
// contract and the exit statuses).
func runLock(ctx context.Context, p process, args []string) int {
	cfg := newLockConfig()
	err := parseArgs(cfg.set, args, lockUsage, p.stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	given := givenOnCommandLine(cfg.set)
	if err == nil {
		err = applyEnv(cfg.set, p.environ)
	}
	if err == nil {
		if err = cfg.check(p.environ); err != nil {
			err = blameEnv(err, given, p.environ)
		}
	}
	var ce *supervise.CommandError
	if errors.As(err, &ce) {
		fmt.Fprintf(p.stderr, "sidecar lock: %v\n", err)
		return ce.ExitStatus()
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
	if os.Getpid() == 1 {
		// The entrypoint of a container without an init: what is
		// orphaned in it is re-parented to the lock, which reaps it.
		defer supervise.ReapOrphans()()
	}
	l, err := buildLocker(ctx, *cfg, p, log)
	if err != nil {
		log.Error("sidecar lock failed", "err", err)
		return 1
	}
	defer l.close()
	return l.run(ctx)
}

// lockUsage is what sidecar lock --help prints above the flags.
const lockUsage = `Usage: sidecar lock [flags] -- CMD [ARGS...]

Joins the election with the same backend and election flags as the
sidecar (on SQLite, --sqlite-path is required: the same file for every run
of the job, wherever it starts), waits until it leads, then runs CMD with
these variables added to its environment:

  LEADER_SIDECAR_TOKEN        the fencing token of this term; attach it to every write
  LEADER_SIDECAR_IDENTITY     this candidate's identity, as the record names it
  LEADER_SIDECAR_VALID_UNTIL  the end of the claim when CMD started (RFC 3339); renewed while CMD runs
  LEADER_SIDECAR_LEASE        what is elected: <namespace>/<name> (lease) or <name> (sqlite, postgres)

It keeps renewing while CMD runs. If leadership is lost (the claim lapses,
another term begins, the SQLite file is deleted or replaced) CMD's process
group gets SIGTERM, then SIGKILL after --kill-grace (default: half of
--lease-duration minus --renew-deadline, so SIGKILL is sent at the latest
by halfway between the end of the claim and the earliest instant another
candidate may lead). On Linux a guardian process between the lock and
CMD enforces the claim on its own clock: the lock tells it each new end of
the claim, and CMD is stopped when the last one passes, even if the lock is
stopped (SIGSTOP, Ctrl-Z) or starved. SIGTERM, SIGINT and SIGHUP sent to
sidecar lock are passed on to CMD; Ctrl-Z (SIGTSTP) suspends CMD and the
lock together, and fg (SIGCONT) resumes both. When CMD exits, whatever is
left of its process group is killed and the lease is released, so the next
sidecar lock on the election starts at once. POST /leader/release and
/leader/handoff on --http-address stop CMD the same way (SIGTERM, SIGKILL
after --kill-grace) before they release or hand off; the lock then exits
with CMD's status. If sidecar lock
itself is killed, CMD's whole process group is killed at once, what CMD
started in the background too (Linux only, by the guardian; not what CMD
moved out of its group). As PID 1 (a container's entrypoint) it reaps the
processes orphaned to it.

It waits for ever to lead, unless --timeout (give up after that long) or
--nonblock (give up at once if the record names another holder, as
flock -n does). It logs only warnings and errors unless --verbose.

Exit status: CMD's own; 128+n if CMD was killed by signal n; 1 if
leadership was lost while CMD ran (whatever CMD then returned) or before it
could start, or the store cannot be opened or was lost before CMD started; 2 for invalid flags
or no CMD; 124 if it did not lead within --timeout or --nonblock found
another holder (CMD never ran); 126 if CMD cannot be run, 127 if it is not
found; 128+n if signal n arrived before CMD started.
`

// lockConfig is sidecar lock's whole configuration: newLockConfig binds
// its flags straight into it, check validates and resolves it in place.
type lockConfig struct {
	// set holds lock's flags, bound to the fields below.
	set *pflag.FlagSet
	// election is the sidecar's, parsed and checked the same way.
	election electionConfig
	// killGrace is the wait between SIGTERM and SIGKILL once leadership
	// is lost; unless given, check derives it from the timings.
	killGrace   time.Duration
	httpAddress string // "" for none
	// timeout bounds the wait to lead (0: for ever); nonblock gives up
	// as soon as the record names another holder.
	timeout  time.Duration
	nonblock bool
	log      logConfig
	// verbose is --log-level info.
	verbose bool
	// command is CMD and its arguments; path is CMD as found in $PATH.
	// check sets both.
	command []string
	path    string
}

// newLockConfig returns lock's configuration at its defaults, its flags
// bound in set: the election flags the sidecar has, and lock's own.
func newLockConfig() *lockConfig {
	c := &lockConfig{set: newFlagSet("sidecar lock")}
	fs := c.set
	fs.SetInterspersed(false) // the first word that is not a flag is CMD
	c.election.addElection(fs)
	fs.DurationVar(&c.killGrace, "kill-grace", 0, "after leadership is lost (or a release or hand-off is asked for), how long CMD has between SIGTERM and SIGKILL; at most three quarters of --lease-duration minus --renew-deadline (default: half of it, so CMD is killed at the latest by halfway between the end of the claim and the earliest instant another candidate may lead)")
	fs.StringVar(&c.httpAddress, "http-address", "", "serve the app API (GET /leader, /leader/watch, ...) of this candidate on a loopback address, e.g. 127.0.0.1:4040 (default: off)")
	fs.DurationVar(&c.timeout, "timeout", 0, "wait at most this long to lead; if it does not, exit 124 without running CMD (default: wait for ever)")
	fs.BoolVarP(&c.nonblock, "nonblock", "n", false, "if another candidate holds the lock, exit 124 at once without running CMD, as flock -n does")
	c.election.addStore(fs)
	c.log.add(fs, lockLogLevel)
	fs.BoolVarP(&c.verbose, "verbose", "v", false, "log what the lock does (--log-level info); by default it logs only warnings and errors")
	documentEnv(fs)
	return c
}

// check checks every setting and CMD, and resolves what depends on the
// environment (see electionConfig.check). Its error names the flag and
// the rule it broke; a CMD that cannot be found is a
// *supervise.CommandError.
func (c *lockConfig) check(environ []string) error {
	if err := c.election.check(environ); err != nil {
		return err
	}
	if c.verbose {
		if c.set.Changed("log-level") {
			return errors.New("--verbose: is --log-level info; give one of them")
		}
		c.log.level = "info"
	}
	if err := c.log.check(); err != nil {
		return err
	}
	if c.set.Changed("timeout") && c.timeout <= 0 {
		return fmt.Errorf("--timeout: must be greater than 0 (for no wait at all, --nonblock), got %v", c.timeout)
	}
	switch most := maxKillGrace(c.election); {
	case !c.set.Changed("kill-grace"):
		c.killGrace = defaultKillGrace(c.election)
	case c.killGrace < 0:
		return fmt.Errorf("--kill-grace: must not be negative, got %v", c.killGrace)
	case c.killGrace > most:
		return fmt.Errorf("--kill-grace: must be at most %v (three quarters of --lease-duration minus --renew-deadline), "+
			"so that CMD is killed with a margin before another candidate may lead; got %v (raise --lease-duration for a longer grace)",
			most, c.killGrace)
	}
	if c.httpAddress != "" {
		if err := checkAddress("--http-address", c.httpAddress); err != nil {
			return err
		}
		if !loopbackAddress(c.httpAddress) {
			return fmt.Errorf("--http-address: must be a loopback address (127.0.0.0/8, [::1] or localhost), got %q", c.httpAddress)
		}
	}
	c.command = c.set.Args()
	if len(c.command) == 0 || c.command[0] == "" {
		return errNoCommand
	}
	// The sidecar's default file, ./leader-sidecar.db, depends on the
	// working directory: two locks started from two (cron's and a
	// shell's) would not exclude each other, silently.
	if c.election.backend == "sqlite" && !c.set.Changed("sqlite-path") {
		return errors.New("--sqlite-path: required with the sqlite backend: the file every run of the job shares, best an absolute path " +
			"(locks exclude each other only on the same file, and a default in the working directory would differ between cron and a shell)")
	}
	path, err := exec.LookPath(c.command[0])
	if err != nil {
		return &supervise.CommandError{Err: err}
	}
	c.path = path
	return nil
}

// errNoCommand: sidecar lock was given no CMD.
var errNoCommand = errors.New("no command: want sidecar lock [flags] -- CMD [ARGS...]")

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

// The variables sidecar lock adds to CMD's environment, replacing any of
// the same name it inherits.
const (
	// envToken is the fencing token of the term CMD runs in.
	envToken = "LEADER_SIDECAR_TOKEN"
	// envIdentity is the candidate's identity (the record's holder): the
	// identity prefix with this process start's suffix.
	envIdentity = "LEADER_SIDECAR_IDENTITY"
	// envValidUntil is when the claim would end, RFC 3339 with
	// nanoseconds, as it stood when CMD started. The lock renews while CMD
	// runs, so the claim usually goes on past it; CMD is signalled when
	// the claim actually ends.
	envValidUntil = "LEADER_SIDECAR_VALID_UNTIL"
	// envLease names what is being elected, as /leader's "lease":
	// "<namespace>/<name>" for a Lease, the name for SQLite.
	envLease = "LEADER_SIDECAR_LEASE"
)

// lockEnvNames lists them, for the check of unknown LEADER_SIDECAR_*
// variables: a sidecar lock run by CMD inherits them.
var lockEnvNames = []string{envToken, envIdentity, envValidUntil, envLease}

// commandEnv is environ with the variables of the term st, lease naming
// the election.
func commandEnv(environ []string, st election.Status, lease string) []string {
	add := []string{
		envToken + "=" + strconv.FormatInt(st.Token, 10),
		envIdentity + "=" + st.Identity,
		envValidUntil + "=" + st.ValidUntil.UTC().Format(time.RFC3339Nano),
		envLease + "=" + lease,
	}
	env := make([]string, 0, len(environ)+len(add))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case envToken, envIdentity, envValidUntil, envLease:
			continue
		}
		env = append(env, kv)
	}
	return append(env, add...)
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
	st, err := openStore(ctx, el, el.kubeClients(), log)
	if err != nil {
		return nil, err
	}
	ec := el.electorConfig(st.backend, log)
	ec.ReleaseOnCancel = true
	elector, err := election.New(ec)
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
	servers, err := listen(log, []listener{{"app", "--http-address", cfg.httpAddress, api}})
	if err != nil {
		st.close()
		return nil, err
	}
	return &locker{cfg: cfg, p: p, log: log, elector: elector, lease: st.lease,
		servers: servers, stepDowns: gate, streamsDone: streamsDone, close: st.close}, nil
}

// electionRun is the elector's Run in its goroutine.
type electionRun struct {
	done chan struct{}
	err  error // what Run returned; read it after done is closed
}

// run takes part in the election, runs CMD once while leading, and
// returns the exit status. ctx ending counts as a SIGTERM.
func (l *locker) run(ctx context.Context) int {
	// The election stops only when run says so, never on a signal, so the
	// lease is never released while CMD may still run.
	runCtx, stopElection := context.WithCancel(context.Background())
	e := &electionRun{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		e.err = l.elector.Run(runCtx)
	}()
	for _, s := range l.servers {
		go func() { _ = s.serve() }()
	}
	defer func() {
		l.stepDowns.finish()
		stopElection()
		<-e.done // stopped claiming, and released if it held the record
		l.shutdownServers()
	}()

	st, status, leading := l.awaitLeadership(ctx, e)
	if !leading {
		return status
	}
	// Ctrl-Z suspends the lock and CMD together (supervise.NotifyJobControl).
	jobControl, stopJobControl := supervise.NotifyJobControl()
	defer stopJobControl()
	c, err := supervise.Start(supervise.Command{Path: l.cfg.path, Args: l.cfg.command,
		Env: commandEnv(l.p.environ, st, l.lease), Stdin: l.p.stdin, Stdout: l.p.stdout, Stderr: l.p.stderr,
		KillGrace: l.cfg.killGrace, Log: l.log}, st.ValidUntil)
	if errors.Is(err, supervise.ErrClaimEnded) {
		l.log.Error("leadership was lost before the command started; exiting 1", "err", err)
		return 1
	}
	if err != nil {
		l.log.Error("cannot run the command", "err", err)
		var ce *supervise.CommandError
		if errors.As(err, &ce) {
			return ce.ExitStatus()
		}
		return 126
	}
	l.log.Info("leading: running the command", "token", st.Token, "pid", c.Pid())
	lost, stepped := l.supervise(ctx, c, st, e, jobControl)
	c.KillLeftovers()
	l.stepDowns.finish()
	status = c.ExitStatus()
	switch {
	case lost != "":
		l.log.Error("leadership was lost while the command ran; exiting 1", "reason", lost, "command status", status)
		return 1
	case stepped != "":
		l.log.Info("the command was stopped and leadership given up", "reason", stepped, "command status", status)
		return status
	}
	l.log.Info("the command exited; releasing the lease", "status", status)
	return status
}

// exitNotLed is the exit status when the lock gave up before it led
// (--timeout, --nonblock), as timeout(1) exits when its command timed out.
const exitNotLed = 124

// awaitLeadership waits until this candidate leads. If it never does (the
// election stops, a signal, ctx ends, --timeout passes, or --nonblock sees
// another holder) it returns leading false and the exit status.
func (l *locker) awaitLeadership(ctx context.Context, e *electionRun) (st election.Status, status int, leading bool) {
	l.log.Info("waiting to lead", "timeout", l.cfg.timeout, "nonblock", l.cfg.nonblock)
	var giveUp <-chan time.Time
	if l.cfg.timeout > 0 {
		timer := time.NewTimer(l.cfg.timeout)
		defer timer.Stop()
		giveUp = timer.C
	}
	for {
		changed := l.elector.Changed()
		st := l.elector.Status()
		if st.Leader {
			return st, 0, true
		}
		if l.cfg.nonblock && st.Holder != "" && st.Holder != st.Identity {
			l.log.Info("another candidate holds the lock; not running the command (--nonblock)", "holder", st.Holder)
			return st, exitNotLed, false
		}
		select {
		case <-giveUp:
			l.log.Info("did not lead within --timeout; not running the command", "timeout", l.cfg.timeout, "holder", st.Holder)
			return st, exitNotLed, false
		case <-changed:
		case <-e.done:
			l.log.Error("the election stopped before this candidate led; not running the command", "err", e.err)
			return st, 1, false
		case sig := <-l.p.signals:
			l.log.Info("signal before leading; not running the command", "signal", sig)
			return st, 128 + signalNumber(sig), false
		case req := <-l.stepDowns.requests:
			// No CMD runs yet: nothing to stop first.
			req.reply(req.perform(ctx, l.elector))
		case <-ctx.Done():
			return st, 128 + int(syscall.SIGTERM), false
		}
	}
}

// supervise watches the claim while CMD runs, tells CMD's supervisor
// each new end of it, passes signals on to CMD, and stops it if
// leadership is lost or the app API asks for a release or a hand-off
// (supervise.Child.Stop: SIGTERM, then SIGKILL after --kill-grace). It
// returns once CMD has exited, with why leadership was lost ("" if it was
// not), and what the lock did on request after CMD had exited, what is
// left of its group killed ("" if nothing was asked). The supervisor
// stops CMD by itself at the end of the last claim it was told of, should
// this loop not run (the lock stopped or starved).
func (l *locker) supervise(ctx context.Context, c *supervise.Child, term election.Status, e *electionRun,
	jobControl <-chan os.Signal) (lost, stepped string) {
	var pending *stepDown // the release or hand-off waiting for CMD to exit
	claimed := term.ValidUntil
	electionDone, ctxDone := e.done, ctx.Done()
	for {
		changed := l.elector.Changed()
		var lapse <-chan time.Time
		if lost == "" {
			st := l.elector.Status()
			if lost = lossReason(st, term.Token, e); lost != "" {
				l.log.Error("leadership lost: stopping the command", "reason", lost, "kill grace", l.cfg.killGrace)
				c.Stop()
			} else {
				if st.ValidUntil.After(claimed) {
					claimed = st.ValidUntil
					c.Claim(claimed)
				}
				// The claim ends at ValidUntil unless a renewal moves it
				// (which closes changed): look again then.
				lapse = time.After(max(time.Until(st.ValidUntil), time.Millisecond))
			}
		}
		select {
		case <-c.Done():
			if lost == "" && c.ClaimEnded() {
				// Stopped by its supervisor while this loop did not
				// run (the lock stopped or starved).
				if lost = lossReason(l.elector.Status(), term.Token, e); lost == "" {
					lost = "the claim ended before it was renewed"
				}
				l.log.Error("leadership lost: stopping the command", "reason", lost, "kill grace", l.cfg.killGrace,
					"stopped by", "its supervisor, at the end of the claim")
			}
			if pending == nil {
				return lost, ""
			}
			if lost != "" {
				pending.reply(l.elector.Status(), fmt.Errorf("%w: leadership was lost while the command was being stopped (%s)", election.ErrNotLeader, lost))
				return lost, ""
			}
			c.KillLeftovers()
			return "", l.performStepDown(pending)
		case req := <-l.stepDowns.requests:
			switch {
			case lost != "":
				req.reply(l.elector.Status(), fmt.Errorf("%w: leadership was lost (%s); the command is being stopped", election.ErrNotLeader, lost))
			case pending != nil:
				req.reply(l.elector.Status(), errStepDownUnderWay)
			default:
				pending = req
				l.log.Info("stopping the command before giving up leadership", "request", req.what(), "kill grace", l.cfg.killGrace)
				c.Stop()
			}
		case <-changed:
		case <-lapse:
		case <-electionDone:
			electionDone = nil
		case sig := <-l.p.signals:
			l.log.Info("passing the signal on to the command", "signal", sig)
			c.Signal(sig)
		case sig := <-jobControl:
			l.log.Info("passing the signal on to the command (job control)", "signal", sig)
			c.PassJobControl(sig)
		case <-ctxDone:
			ctxDone = nil
			c.Signal(syscall.SIGTERM)
		}
	}
}

// performStepDown releases or hands off once CMD is gone, answers the
// request, and says what was done. The writes get their own time (the
// asker may have given up meanwhile): a lease left held would make the
// next candidate wait it out.
func (l *locker) performStepDown(req *stepDown) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*l.cfg.election.renewDeadline)
	defer cancel()
	st, err := req.perform(ctx, l.elector)
	req.reply(st, err)
	switch {
	case err != nil:
		l.log.Warn("the command was stopped, but the step-down failed", "request", req.what(), "err", err)
		return fmt.Sprintf("stopped for %s, which failed: %v", req.what(), err)
	case req.handoff:
		return "handed off to " + st.Holder + " (" + req.what() + ")"
	default:
		return "released (" + req.what() + ")"
	}
}

// lossReason says why the term token is over, or "" if st still claims it.
func lossReason(st election.Status, token int64, e *electionRun) string {
	select {
	case <-e.done:
		return fmt.Sprintf("the election stopped: %v", e.err)
	default:
	}
	switch {
	case st.Leader && st.Token == token:
		return ""
	case st.Leader:
		return fmt.Sprintf("a new term began (token %d)", st.Token)
	case st.Holder != "" && st.Holder != st.Identity:
		return "the record now names " + st.Holder
	case st.Holder == "":
		// A release or hand-off asked of this lock stops CMD first and
		// is logged as such: this one came from elsewhere.
		return "the record was released or removed under this lock"
	default:
		return "the claim lapsed: no successful renewal within --renew-deadline"
	}
}

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return int(syscall.SIGTERM)
}

func (l *locker) shutdownServers() {
	close(l.streamsDone)
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	for _, s := range l.servers {
		_ = s.srv.Shutdown(ctx)
	}
}

// A step-down is POST /leader/release or POST /leader/handoff on the
// lock's app API. It goes through the locker, never straight to the
// elector: while CMD runs, the locker stops CMD first (SIGTERM, SIGKILL
// after --kill-grace, what is left of its group killed and reaped), and
// only then releases or hands off, so another candidate can never lead
// while CMD still runs.

// stepDown is one request to release or hand off.
type stepDown struct {
	handoff bool
	to      string // the hand-off's target; "" for any candidate
	answer  chan stepDownAnswer
}

type stepDownAnswer struct {
	st  election.Status
	err error
}

// what names the step-down in logs.
func (s *stepDown) what() string {
	if s.handoff {
		return "POST /leader/handoff"
	}
	return "POST /leader/release"
}

func (s *stepDown) reply(st election.Status, err error) {
	s.answer <- stepDownAnswer{st, err}
}

// perform releases or hands off. A hand-off that fails while this
// candidate still leads is followed by a release: CMD has been stopped,
// and the lock exits.
func (s *stepDown) perform(ctx context.Context, e *election.Elector) (election.Status, error) {
	if !s.handoff {
		return e.Release(ctx)
	}
	st, err := e.Handoff(ctx, s.to)
	if err == nil || !e.Status().Leader {
		return st, err
	}
	st, rerr := e.Release(ctx)
	if rerr != nil {
		return st, fmt.Errorf("%w; the command was stopped, and releasing the lease failed too: %v", err, rerr)
	}
	return st, fmt.Errorf("%w; the command was stopped, so the lease was released instead", err)
}

// stepDownGate hands the step-downs of the app API to the locker.
type stepDownGate struct {
	requests chan *stepDown
	// finished is closed once CMD has exited and what it left is killed,
	// or once it is known that CMD will not run: step-downs then go
	// straight to the elector.
	finished chan struct{}
	once     sync.Once
}

func newStepDownGate() *stepDownGate {
	return &stepDownGate{requests: make(chan *stepDown), finished: make(chan struct{})}
}

// finish lets later step-downs go straight to the elector.
func (g *stepDownGate) finish() { g.once.Do(func() { close(g.finished) }) }

// lockElector is the elector as the lock's app API sees it: Release and
// Handoff are routed through the locker.
type lockElector struct {
	*election.Elector
	gate *stepDownGate
}

func (e lockElector) Release(ctx context.Context) (election.Status, error) {
	return e.stepDown(ctx, &stepDown{})
}

func (e lockElector) Handoff(ctx context.Context, to string) (election.Status, error) {
	return e.stepDown(ctx, &stepDown{handoff: true, to: to})
}

func (e lockElector) stepDown(ctx context.Context, s *stepDown) (election.Status, error) {
	s.answer = make(chan stepDownAnswer, 1) // the locker never waits for the handler
	select {
	case e.gate.requests <- s:
	case <-e.gate.finished:
		return s.perform(ctx, e.Elector)
	case <-ctx.Done():
		return e.Status(), ctx.Err()
	}
	select {
	case a := <-s.answer:
		return a.st, a.err
	case <-ctx.Done():
		return e.Status(), fmt.Errorf("%s: %w (the command is being stopped, then the lease is released or handed off)", s.what(), ctx.Err())
	}
}

// errStepDownUnderWay refuses a second step-down while the first one
// stops CMD.
var errStepDownUnderWay = errors.New("a release or hand-off is already stopping the command")
