// Package process holds the end-to-end tests that need no API server: the
// real sidecar binary, built once by TestMain, run as separate OS processes
// that contend through one real SQLite file, driven with real signals
// (SIGKILL, SIGTERM, SIGINT, SIGSTOP/SIGCONT) and abused with bad input;
// and the binary built as the Dockerfile builds it and run in an empty
// root.
//
// What they need besides Go:
//
//   - helm, for the release (TestRelease): $HELM, else the one
//     hack/helm.sh builds from the Go module proxy into ~/.cache on first
//     use (a minute, once);
//   - root, for TestImageBinaryRunsInAnEmptyRootAsNonRoot (chroot and uid
//     65532), which fails rather than skips without it.
//
// Run them:
//
//	go test -race -count=1 ./e2e/process/
//	go test -race -count=1 -run 'TestSQLiteFileDeletedOrReplaced' ./e2e/process/
//
// Tests that need a kube-apiserver are in e2e/apiserver, the charts' tests
// in e2e/chart; the harness they share (sidecar processes, /leader, the
// overlap sweeps) is internal/sidecartest.
package process
