// Package process holds the end-to-end tests that need no API server: the
// real sidecar binary, built once by TestMain, run as separate OS processes
// that contend through one real SQLite file or PostgreSQL server (Debian's
// postgresql, started by internal/pgtest; the failover tests start a
// primary and a streaming standby of their own), driven with real signals
// (SIGKILL, SIGTERM, SIGINT, SIGSTOP/SIGCONT), abused with bad input, and
// asked by the example clients of examples/clients. Every test works in
// a directory of its own and runs in parallel with the others, four at a
// time unless -parallel says otherwise (TestMain). Besides Go they need
// sh, curl, jq, sed, python3 and node (Node.js 20 or later; for those
// clients, in the single election and in shard mode), timeout and the
// PostgreSQL server binaries (initdb, postgres, pg_basebackup); the
// test of sidecar lock as PID 1 needs root and unshare (util-linux), and
// fails without them.
//
// Run them:
//
//	go test -race -count=1 ./e2e/process/
//	go test -race -count=1 -run 'TestSQLiteFileDeletedOrReplaced' ./e2e/process/
//
// The set test in the manner of Jepsen's lock-set (jepsen_test.go, its
// harness in internal/settest): three sidecars elect on one SQLite file,
// and through the PostgreSQL server; each replica's app, a goroutine of
// the test, appends ids of its own to one list in a PostgreSQL row while
// it believes its sidecar leads, a read-modify-write in one transaction
// with fence.SQLGuard's check of its term first; an app whose sidecar
// does not answer keeps the term it last heard and writes with it. A
// nemesis seeded by the clock (or LEADER_SIDECAR_JEPSEN_SEED), printed,
// stops the leader's sidecar past the lease (SIGSTOP, SIGCONT) and kills
// sidecars (SIGKILL), starting new ones in their place. The checker wants
// every acknowledged append in the final list, no id twice, none from an
// append that cannot have taken effect, and the history linearizable as a
// list under atomic appends (github.com/anishathalye/porcupine); the
// same run without the guard must break one of these. The nemesis runs
// 12 s in make test, LEADER_SIDECAR_JEPSEN_DURATION in make jepsen:
//
//	LEADER_SIDECAR_JEPSEN_DURATION=5m go test -count=1 -v -run 'SetUnderFaults|SetLosesWrites' ./e2e/process/
//
// Tests that need a kube-apiserver are in e2e/apiserver, the charts' tests
// in e2e/chart, the image's and the release's in e2e/packaging; the
// harness they share (sidecar processes, /leader, the overlap sweeps) is
// internal/sidecartest.
package process
