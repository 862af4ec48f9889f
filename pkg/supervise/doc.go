// Package supervise runs the command of sidecar lock (CMD) and makes sure
// nothing of it runs on once the lock may no longer lead. It is the lock's
// process supervision; whether the lock leads is decided elsewhere
// (package election), and the lock tells this package what to do.
//
// The contract:
//
//   - CMD runs in a process group of its own, so a signal reaches
//     everything it started (the commands of a shell script too), not the
//     shell alone. Signals passed on with Child.Signal go to that group.
//   - CMD runs only while the lock's claim lasts. Start is given the end
//     of the claim, and CMD does not start if it has passed
//     (ErrClaimEnded); the lock tells each new end with Child.Claim. When
//     the end last told of passes, CMD's group gets SIGTERM, then SIGCONT
//     (a suspended process acts on SIGTERM only once it runs), then
//     SIGKILL after the kill grace unless CMD exited (Child.ClaimEnded
//     says so afterwards); Child.Stop does the same at once. On Linux
//     this is enforced by the guardian (see below), a process of its own,
//     whether the lock is dead, stopped (SIGSTOP, Ctrl-Z), starved or
//     slow; the end reaches it as a duration from the instant the lock
//     read its claim, on the machine's monotonic clock (orders.go), so it
//     is never later than the lock's own. Elsewhere a goroutine of the
//     lock enforces it, and stops with the lock.
//   - Job control suspends the whole job: SIGTSTP sent to the lock is
//     passed on to CMD's group, then the lock stops itself; SIGCONT is
//     passed on (NotifyJobControl, Child.PassJobControl).
//   - When CMD exits, whatever is left of its group is killed before CMD
//     is reaped (its pid, the group's id, cannot name another group
//     meanwhile) on Linux, or at once after elsewhere (Child.KillLeftovers),
//     so nothing it started runs on once the lease is released.
//   - If the lock itself dies (SIGKILL, the OOM killer), CMD's whole group
//     is killed at once, what CMD started in the background too. On Linux
//     the lock does not start CMD itself: it starts the same binary again
//     as CMD's guardian (GuardianArg; see guardian_linux.go), which the
//     kernel's parent-death signal reaches and which then kills CMD's
//     group. Elsewhere CMD and what it started run on. A stalled node
//     (the whole machine paused) is beyond this package: the guardian
//     pauses with the lock.
//   - What CMD moved out of its process group (setsid, setpgid) is not
//     reached.
//   - CMD's exit status comes back as a shell reports it: its own, or
//     128+n if signal n killed it; a CMD that cannot start is a
//     *CommandError, 127 if not found, 126 otherwise.
//   - The lock may be PID 1 of its PID namespace (a container's
//     entrypoint). There it calls ReapOrphans, which reaps the processes
//     re-parented to it, as tini does, but never one of its own children,
//     whose status belongs to whoever waits for it (see reap_linux.go).
package supervise
