// Package chart holds the tests of the Helm charts in charts/: the library
// chart (leader-sidecar-lib) and the example chart that uses it, rendered
// by a pinned helm, decoded strictly into typed objects and checked; linted
// on Helm 3 and Helm 4; refusing at render time what the sidecar would
// refuse, and agreeing with the real sidecar binary (built once by
// TestMain) on every value; the library used from a `helm create` chart as
// its README says; and the charts on a real kube-apiserver (server-side
// dry-run, Pod Security "restricted", their RBAC applied for real to a
// running sidecar, helm install and uninstall).
//
// What they need besides Go:
//
//   - helm: $HELM, else the one hack/helm.sh builds from the Go module
//     proxy into ~/.cache on first use (a minute, once); and Helm 4 for
//     TestChartLintHelm3AndHelm4: $HELM4, else `hack/helm.sh 4`;
//   - for the tests that send the charts to an API server (those of
//     apiserver_test.go, TestChartLibraryInHelmCreateChart and
//     TestChartPodSettingsAcceptedByTheAPIServer): KUBEBUILDER_ASSETS
//     (hack/envtest-binaries.sh). One API server is started the first time
//     such a test runs and shared by the package; without the binaries
//     those tests fail, never skip. The other tests start none and run
//     without them.
//
// Run them:
//
//	export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh | tail -1)
//	go test -race -count=1 ./e2e/chart/
//	go test -race -count=1 -run 'TestChartTemplateMatrix' ./e2e/chart/   # no API server
//
// The chart helpers they use (rendering, decoding, the helm create chart)
// are in internal/sidecartest.
package chart
