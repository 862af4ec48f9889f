package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

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

// lockUsage is what sidecar lock --help prints above the flags.
const lockUsage = `Usage: sidecar lock [flags] -- CMD [ARGS...]

Joins the election with the same backend and election flags as the
sidecar, waits until it leads, then runs CMD with these variables added to
its environment:

  LEADER_SIDECAR_TOKEN        the fencing token of this term; attach it to every write
  LEADER_SIDECAR_IDENTITY     this candidate's identity, as the record names it
  LEADER_SIDECAR_VALID_UNTIL  the end of the claim when CMD started (RFC 3339); renewed while CMD runs
  LEADER_SIDECAR_LEASE        what is elected: <namespace>/<name> (lease) or <name> (sqlite)

It keeps renewing while CMD runs. If leadership is lost (the claim lapses,
another term begins, the SQLite file is deleted or replaced) CMD's process
group gets SIGTERM, then SIGKILL after --kill-grace (default: half of
--lease-duration minus --renew-deadline, so SIGKILL is sent at the latest
by halfway between the end of the claim and the earliest instant another
candidate may lead). SIGTERM, SIGINT and SIGHUP sent to sidecar lock are
passed on to CMD. When CMD exits, whatever is left of its process group is
killed and the lease is released, so the next sidecar lock on the election
starts at once. POST /leader/release and /leader/handoff on --http-address
stop CMD the same way (SIGTERM, SIGKILL after --kill-grace) before they
release or hand off; the lock then exits with CMD's status. If sidecar lock
itself is killed, CMD's whole process group is killed at once, what CMD
started in the background too (Linux only, through a guardian process
between the lock and CMD; not what CMD moved out of its group).

It waits for ever to lead, unless --timeout (give up after that long) or
--nonblock (give up at once if the record names another holder, as
flock -n does). It logs only warnings and errors unless --verbose.

Exit status: CMD's own; 128+n if CMD was killed by signal n; 1 if
leadership was lost while CMD ran (whatever CMD then returned), or the
store cannot be opened or was lost before CMD started; 2 for invalid flags
or no CMD; 124 if it did not lead within --timeout or --nonblock found
another holder (CMD never ran); 126 if CMD cannot be run, 127 if it is not
found; 128+n if signal n arrived before CMD started.
`
