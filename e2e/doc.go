// Package e2e holds no code: it is the map of the end-to-end tests, which
// run the real sidecar binary as OS processes and are grouped by what they
// need.
//
//	e2e/process/    processes only: the sidecar on a real SQLite file,
//	                real signals (SIGKILL, SIGTERM, SIGINT, SIGSTOP and
//	                SIGCONT), bad input and abusive clients, the example
//	                clients. Needs Go, and curl, jq and python3.
//	e2e/packaging/  what a release ships: the binary built as the
//	                Dockerfile builds it, the OCI images (hack/image.sh),
//	                hack/release.sh. Needs helm (hack/helm.sh) and git; the
//	                empty-root test needs root.
//	e2e/chart/      the Helm charts: rendered, linted on Helm 3 and 4,
//	                checked against the sidecar binary, and on a real
//	                kube-apiserver (envtest). Needs helm (hack/helm.sh) and,
//	                for the API server cases only, KUBEBUILDER_ASSETS.
//	e2e/alerts/     the Prometheus alerts: promtool check rules and
//	                promtool test rules (every alert firing and not), the
//	                charts' PrometheusRule compared with the rule file.
//	                Runs no sidecar. Needs promtool (Debian: prometheus)
//	                and helm.
//	e2e/inject/     the injector chart (sidecar injection by
//	                MutatingAdmissionPolicy) on a real kube-apiserver
//	                (envtest), by server-side dry run; its container
//	                compared with the library chart's. Runs no sidecar.
//	                Needs helm and KUBEBUILDER_ASSETS.
//	e2e/apiserver/  a real kube-apiserver and etcd (envtest): the Lease
//	                backend, interop with client-go, RBAC, Pod readiness,
//	                chaos; and the tests that cover both backends with the
//	                API server for one of them. Needs KUBEBUILDER_ASSETS
//	                (hack/envtest-binaries.sh).
//	e2e/cluster/    build tag cluster: the product as Pods on a one-node
//	                cluster (hack/cluster.sh); make test-cluster runs them.
//
// Commands:
//
//	go test -race -count=1 ./e2e/process/
//	export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh | tail -1)
//	go test -race -count=1 -timeout 20m ./e2e/...    # all but e2e/cluster
//	make test-cluster                                 # e2e/cluster
//
// A new test goes in the folder of the most it needs (a test of the charts
// in e2e/chart, of the image or the release in e2e/packaging, whatever
// they need), in a file named after what it tests. The
// harness they share, building the sidecar once per package (TestMain
// calls sidecartest.Main, or sidecartest.KubeMain where no sidecar
// runs), starting sidecars, reading /leader, the overlap
// sweeps, the shared API server, helm and the chart helpers, is
// internal/sidecartest.
package e2e
