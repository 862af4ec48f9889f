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
// Tests that need a kube-apiserver are in e2e/apiserver, the charts' tests
// in e2e/chart, the image's and the release's in e2e/packaging; the
// harness they share (sidecar processes, /leader, the overlap sweeps) is
// internal/sidecartest.
package process
