// Package apiserver holds the end-to-end tests that need a real
// kube-apiserver and etcd (controller-runtime's envtest): the real sidecar
// binary, built once by TestMain, run as OS processes on a Lease (fail-over,
// hand-off, Events, interop with a client-go candidate, the API server
// stopped, the Lease deleted or edited by hand, least-privilege RBAC,
// leadership shown on Pods, sidecar status and kubectl-leader, a bounded
// chaos schedule), and electors run in-process on the Lease backend where
// a request must land with its answer lost
// (TestShutdownReleasesARenewalWhoseAnswerWasLost). The charts on the API
// server are tested in e2e/chart.
// A test that covers both backends and needs the API server for one of
// them (TestSplitBrain, TestRecordDeletedOrEmptied,
// TestHealthWithDefaultTimings, TestChaos,
// TestOperatorRaisesTheTokenAboveWhatResourcesAccepted) is here whole,
// its SQLite half included.
//
// One API server is started the first time a test needs it and shared by
// the package; each test works in a namespace of its own. The two tests
// that stop the API server (TestChaos,
// TestLeaseAPIServerDownLeaderStopsClaimingInTime) start one of their own.
// Every test but TestChaos runs in parallel with the others, six at a
// time unless -parallel says otherwise (TestMain): they wait on lease
// durations, renew deadlines and probes far more than they compute.
// TestChaos runs first, alone. Without the
// envtest binaries the tests fail, never skip. Besides Go they need, for
// TestSplitBrain, examples/worker, which the harness builds, and for the
// set test on a Lease (TestLeaseFencedSetUnderFaults and its unsafe
// baseline TestLeaseUnfencedSetLosesWrites, internal/settest, as in
// e2e/process) the PostgreSQL server binaries: the apps keep their list
// in a PostgreSQL server the package starts once.
//
// Run them (the binaries are built once into ~/.cache, minutes when cold):
//
//	export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh | tail -1)
//	go test -race -count=1 -timeout 20m ./e2e/apiserver/
//	go test -race -count=1 -run 'TestLeaseInteropWithClientGo' ./e2e/apiserver/
//
// TestChaos replays a schedule with CHAOS_SEED=<seed>, the seed it logs;
// the set test takes its seed from LEADER_SIDECAR_JEPSEN_SEED (the same
// draws; real timing moves the schedule), and runs its nemesis for
// LEADER_SIDECAR_JEPSEN_DURATION instead of 12 s (make jepsen).
// The harness the tests share with e2e/process is internal/sidecartest.
package apiserver
