// Package inject holds the tests of charts/leader-sidecar-injector, the
// sidecar injection by MutatingAdmissionPolicy: the chart lints clean on
// Helm 3 and Helm 4; installed on a real kube-apiserver (envtest), a
// server-side dry run of a Pod shows what admission makes of it: a Pod
// labelled leader-sidecar.io/inject=true gets the sidecar first among its
// init containers, the very container the library chart renders for the
// same settings (compared field by field); an unlabelled or an already
// injected Pod is unchanged, and so is one that runs the library chart's
// sidecar under another name; a broken parameter refuses only the
// opted-in Pods, with the ValidatingAdmissionPolicy's message; a table of
// settings (the Lease name from an annotation or a label, the timings, the
// app health settings) is admitted or refused by the policy as the
// sidecar's own check (sidecar check, built once for the package) accepts
// or refuses it.
//
// What they need besides Go:
//
//   - helm: $HELM, else what hack/helm.sh builds (and $HELM4, else
//     `hack/helm.sh 4`, for the Helm 4 lint);
//   - KUBEBUILDER_ASSETS (hack/envtest-binaries.sh): kube-apiserver
//     v1.37.2, which serves admissionregistration.k8s.io/v1
//     MutatingAdmissionPolicy. One API server is started by the first test
//     that needs it and shared by the package; without the binaries those
//     tests fail, never skip.
//
// Run them:
//
//	export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh | tail -1)
//	go test -count=1 ./e2e/inject/
//
// The shape checks are internal/injecttest's, which e2e/cluster runs on the
// one-node cluster too; the tests that need Pods to run (Deployments, the
// token, a Job, the docs' commands) are in e2e/cluster: the API server
// alone runs no Pod.
package inject
