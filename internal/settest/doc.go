// Package settest is the set test in the manner of Jepsen's lock-set, on
// real parts, for the end-to-end tests (e2e/process, e2e/apiserver): a
// few sidecar processes elect through one store; each replica's app, a
// goroutine of the test, appends ids of its own to one list kept in a row
// of a real SQL database while it believes its sidecar leads; a seeded
// nemesis pauses and kills the sidecars and breaks their stores; the
// history of the appends is then checked. It is for tests only.
//
//   - The app ([Run.worker]) asks its sidecar GET /leader every 500 ms. An
//     answer replaces what it knows; no answer (a paused or killed
//     sidecar) leaves the term it last heard in hand, and it keeps writing
//     with it, as a slow app that trusts what it last heard would: the
//     stale leader a guard must stop. Each append is one transaction:
//     fence.SQLGuard's check of the term (unless the run is unguarded),
//     the read of the list, a moment's work, the write of the list with
//     the id at the end, the commit.
//   - The nemesis ([Run.nemesis]) injects a fault every 0.5-2 s: it stops
//     the leader's sidecar, once its app has heard that it leads
//     (SIGSTOP), for longer than the lease, then
//     continues it (SIGCONT); or it injects a fault of the store on the
//     leader for as long ([Config.StoreFaults]: on PostgreSQL and the
//     Lease, each sidecar behind a TCP proxy of its own, [ProxiedStore],
//     its path to the store cut, or slowed by 1.5 s each way, past the
//     renew deadline; on the Lease, the Lease deleted too); or it kills a
//     sidecar (SIGKILL), the leader one time in two, and starts a new one
//     in its place. Its first fault is a pause.
//   - The checker ([Run.Check]) wants every acknowledged append in the
//     final list, no id twice, none whose append cannot have taken effect,
//     and the history linearizable as a list under atomic appends
//     ([Model], checked by github.com/anishathalye/porcupine).
//
// [Fenced] runs it with the guard and fails the test on any violation;
// [Unfenced], the unsafe baseline, runs it without the guard and fails
// the test unless the checker finds a violation. The nemesis runs 12 s,
// or LEADER_SIDECAR_JEPSEN_DURATION ([Duration]); its seed is the clock's
// or LEADER_SIDECAR_JEPSEN_SEED ([Seed]), and is logged: it fixes the
// random draws, not the schedule, which real timing moves.
package settest
