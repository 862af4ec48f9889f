// Package sidecartest is the harness of the end-to-end tests (e2e/process,
// e2e/chart, e2e/apiserver) and of the benchmarks: the real sidecar binary
// run as OS processes, and the tools that judge what those processes
// answer. It is for tests and benchmarks only; nothing in the product
// imports it.
//
// What it offers:
//
//   - Builds: [Main], called from a test package's TestMain, builds the
//     sidecar (cmd/sidecar) once per test binary into a temporary
//     directory it removes at the end; [Build] builds another command of
//     the repository once (examples/worker); [HookedBinary] builds the
//     sidecar with its test hooks (-tags e2ehooks), for [SpawnBinary];
//     [RepoPath] names a file of the repository from any test directory,
//     and [MustRead] reads one.
//   - Processes: [Start], [Launch], [Spawn] and [Track] run a sidecar with
//     the short test timings ([LeaseDuration], [RenewDeadline],
//     [RetryPeriod]), a free loopback port and JSON logs; a [Sidecar] is
//     killed when its test ends, and its logs are printed if the test
//     failed. Its core, a [Proc] from [StartProc], needs no test: the
//     benchmarks (hack/bench) start their sidecars with it.
//   - Answers: [Sidecar.Leader] reads GET /leader; [Leaders],
//     [AwaitLeader], [AwaitToken], [Steady] and [AwaitSettled] sample
//     every sidecar of a set and fail the test on a sweep with two
//     leader:true answers; [OpenWatch] follows GET /leader/watch.
//   - Overlaps: a [ClaimLog] collects every leader:true answer of
//     concurrent samplers ([ClaimLog.Sample], [ClaimLog.SweepUntilHalted])
//     and [ClaimLog.Check] fails the test if two terms ever claimed
//     leadership at one instant ([ClaimLog.Overlaps] and
//     [ClaimLog.TwoLeaderSweeps] count them); a [Recorder] keeps every
//     answer of a set and [CheckAnswers] judges them by token. Of the
//     writes a guard let through, [ReadShardWrites] reads the log
//     examples/worker --shards keeps, and [StaleShardWritesAccepted]
//     counts those that did not follow their shard's last accepted term.
//   - Lock runs: [RunLock] runs sidecar lock on a SQLite file to its end.
//     A [Journal] is a file the commands of lock runs append lines to
//     ([Journal.Line]); [Journal.Entries] reads them back as [Entry] lines,
//     [Journal.Await] and [Journal.AwaitOtherTerm] wait for one, and
//     [Journal.SignalAndAwaitNext] signals a lock and waits for the next
//     lock's command. [Journal.SampleRuns] samples which commands run, and
//     [RunSampler.Check] fails the test if two ever ran at once;
//     [ProcessGone] and [AwaitGone] tell when a process has ended. The
//     test kills the process group of every command that journalled when
//     it ends.
//   - Stores: [Kube] is a real kube-apiserver and etcd (envtest), started
//     the first time a test needs it, shared by the package and stopped by
//     [Main]; it fails the test, never skips it, when the binaries are
//     missing. [KubeEnv.CreatePod] makes a Pod object for a sidecar to
//     publish on, and [KubeEnv.AwaitMarked] waits until exactly one Pod
//     shows leadership. [HoldWriteLock] takes a SQLite file's write lock as
//     a stuck writer would.
//   - Charts: [Helm] finds a pinned helm (hack/helm.sh, or $HELM), [Charts]
//     copies charts/ and builds its dependencies, [RenderChart] and
//     [DecodeManifests] decode helm template's output strictly into typed
//     objects; [HelmCreateWithLibrary] makes a `helm create` chart that
//     uses the library as its README says; [ReadChartMeta] reads a chart's
//     Chart.yaml, and [SidecarImageRepository] and [AppImageRepository]
//     are the images the charts default to and a release publishes.
//
// Every helper that can fail takes the test (testing.TB) and fails it with
// a message that names what went wrong; none skips.
package sidecartest
